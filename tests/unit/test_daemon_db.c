/* tests/unit/test_daemon_db.c - SQLite state (daemon/db.h) and its queries
 * (proto/query.h) over one real database file; its journal over a
 * database that cannot be written (a full tmpfs, SQLite's page limit,
 * query_only) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "daemon/db.h"
#include "proto/agentmsg.h"
#include "proto/schema.h"
#include "proto/query.h"
#include "proto/state.h"
#include "tests/unit/db_fixture.h"
#include "tests/unit/helpers.h"

static char tmp[64];

/* A task of argv 'argv' (NULL: none) and the defaults otherwise, into
 * the row 't' (its spec 's'). */
static const struct pl_db_task *row_of(struct pl_db_task *t,
                                       struct pl_spec *s, char **argv)
{
    *s = (struct pl_spec){ .argv = argv, .ranks = 1, .cpr = 1 };
    *t = (struct pl_db_task){ .spec = s };
    return t;
}

static char *argv_x[] = { (char *)"x", NULL };
static char *argv_y[] = { (char *)"y", NULL };

static uint64_t insert(struct pl_db *db, const char *name, uint32_t cores,
                       double now)
{
    char *argv[] = { (char *)"sleep", (char *)"1", NULL };
    char *env[] = { (char *)"A=1", (char *)"B=two", NULL };
    struct pl_spec s = {
        .name = (char *)name,
        .argv = argv,
        .env = env,
        .cwd = (char *)"/work",
        .ranks = 1,
        .cpr = cores,
        .gpr = 0,
        .retries = 2,
        .timeout = 30.5,
    };

    return t_db_insert_spec(db, &s, now);
}

static int change(struct pl_db *db, uint64_t id, int state, uint32_t attempt,
                  double time, const char *node, const char *cores,
                  const char *reason, int exit_code, int sig, int64_t rss)
{
    struct pl_db_change c = {
        .id = id, .state = state, .attempt = attempt, .time = time,
        .node = node, .cores = cores, .reason = reason,
        .exit_code = exit_code, .signal = sig, .maxrss_kb = rss,
    };
    struct pl_error e;

    if (pl_db_task_change(db, &c, &e) < 0) {
        diag("change: %s", e.text);
        return -1;
    }
    return 0;
}

/* What pl_db_load_live() reported. */
struct live {
    int n;
    uint64_t id[16];
    int state[16];
    uint32_t attempts[16];
    char name[16][16];
    char *argv[16][3];
    char *env[16][3];
    char cwd[16][16];
    uint32_t ranks[16], cpr[16], gpr[16], retries[16];
    double timeout[16];
    int fail_at; /* return -1 at this call (1-based), 0 never */
};

static int live_cb(struct pl_db_row *row, void *arg)
{
    struct live *l = arg;
    int i = l->n;
    const struct pl_spec *s = &row->spec;

    if (l->fail_at && i + 1 == l->fail_at) {
        errno = ENOMEM;
        return -1;
    }
    if (i >= 16)
        return 0;
    l->id[i] = row->id;
    l->state[i] = row->state;
    l->attempts[i] = row->attempts;
    snprintf(l->name[i], sizeof(l->name[i]), "%s", s->name ? s->name : "");
    for (size_t k = 0; k < 2; k++) {
        l->argv[i][k] = k < pl_strv_len(s->argv) ? strdup(s->argv[k]) : NULL;
        l->env[i][k] = k < pl_strv_len(s->env) ? strdup(s->env[k]) : NULL;
    }
    l->argv[i][2] = pl_strv_len(s->argv) > 2 ? strdup("...") : NULL;
    l->env[i][2] = pl_strv_len(s->env) > 2 ? strdup("...") : NULL;
    snprintf(l->cwd[i], sizeof(l->cwd[i]), "%s", s->cwd ? s->cwd : "");
    l->ranks[i] = (uint32_t)s->ranks;
    l->cpr[i] = (uint32_t)s->cpr;
    l->gpr[i] = (uint32_t)s->gpr;
    l->retries[i] = (uint32_t)s->retries;
    l->timeout[i] = s->timeout;
    l->n++;
    return 0;
}

static void live_free(struct live *l)
{
    for (int i = 0; i < l->n && i < 16; i++)
        for (int k = 0; k < 3; k++) {
            free(l->argv[i][k]);
            free(l->env[i][k]);
        }
}

static json_t *find_id(json_t *arr, json_int_t id)
{
    size_t i;
    json_t *t;

    json_array_foreach(arr, i, t)
        if (json_integer_value(json_object_get(t, "id")) == id)
            return t;
    return NULL;
}

static bool ids_are(json_t *arr, const json_int_t *ids, size_t n)
{
    if (!json_is_array(arr) || json_array_size(arr) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (json_integer_value(json_object_get(json_array_get(arr, i), "id"))
            != ids[i])
            return false;
    return true;
}

static json_int_t jint(json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static const char *jstr(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "(null)";
}

/* ------------------------------------------------------------ the journal */

static int rank_ev(struct pl_db *db, uint64_t id, uint32_t rank, int state,
                   double time, const char *node, const char *detail)
{
    struct pl_db_change c = {
        .id = id, .state = state, .attempt = 1, .time = time, .node = node,
        .reason = detail, .exit_code = -1, .signal = -1, .maxrss_kb = -1,
    };
    struct pl_error e;

    if (pl_db_rank_event(db, &c, rank, &e) < 0) {
        diag("rank event: %s", e.text);
        return -1;
    }
    return 0;
}

static long long pragma(sqlite3 *h, const char *sql)
{
    return t_db_count(h, sql);
}

/* SQLite's own limit on the file (max_page_count) makes a write that
 * needs a new page fail with SQLITE_FULL: a real failure in the middle
 * of a transaction, which SQLite rolls back. */
static void journal_page_limit(const char *dir)
{
    char path[128], buf[64], big[6000];
    struct pl_error e = { "" };
    struct pl_db *db;
    sqlite3 *h;
    const char *why = NULL;

    snprintf(path, sizeof(path), "%s/limit.db", dir);
    if (!(db = pl_db_open(path, &e))) {
        diag("%s", e.text);
        return;
    }
    h = pl_db_handle(db);
    uint64_t a = insert(db, "a", 1, 10), b = insert(db, "b", 1, 11);
    is(pl_db_commit(db, &e), 0, "limit: 2 tasks stored");
    is(pl_db_unstored(db), 0, "... the journal is empty after a commit");

    /* the file may not grow by one page */
    long long pages = pragma(h, "PRAGMA page_count");
    snprintf(buf, sizeof(buf), "PRAGMA max_page_count = %lld", pages);
    sqlite3_exec(h, buf, NULL, NULL, NULL);
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    int rc = change(db, a, PL_ST_ASSIGNED, 1, 20, "n1", "0", NULL, -1, -1,
                    -1);
    rc |= rank_ev(db, a, 0, PL_ST_ASSIGNED, 20, "n1", big);
    is(rc, 0, "limit: writes past the limit return 0 (journaled)");
    /* N.B. written with the batch's others, by the next read or commit */
    is(pl_db_task_state(db, a, &e), PL_ST_QUEUED,
       "... a read (which writes them first) sees the last commit (task a "
       "queued)");
    int failed = pl_db_failed(db, &why);
    ok(failed == ENOSPC && why && strstr(why, "full"),
       "... the database is failed: ENOSPC (%s)", why ? why : "(null)");
    is(pl_db_in_txn(db), 0, "... the transaction is rolled back");
    is(pl_db_unstored(db), 2, "... both writes wait in the journal");

    /* while failed */
    rc = change(db, b, PL_ST_CANCELED, 0, 21, NULL, NULL, "canceled by user",
                -1, -1, -1);
    rc |= pl_db_node_set(db, "n1", "0,1", "", "up", 22, &e);
    rc |= pl_db_node_set(db, "n1", "0,1", "", "lost", 23, &e);
    rc |= pl_db_node_set(db, "n1", "0,1", "", "up", 24, &e);
    rc |= pl_db_meta_set(db, "job", "7", &e);
    rc |= pl_db_meta_set(db, "job", "8", &e);
    is(rc, 0, "limit: writes while failed return 0");
    is(pl_db_unstored(db), 5,
       "... 3 rows of node n1 and 2 of meta job are one each in the journal");
    uint64_t id = 0;
    errno = 0;
    struct pl_db_task row;
    struct pl_spec spec;
    ok(pl_db_task_insert(db, row_of(&row, &spec, argv_x), PL_ST_QUEUED, 25,
                         &id, &e) == -1
           && errno == ENOSPC && id == 0,
       "... an insert is refused with ENOSPC: %s", e.text);
    errno = 0;
    ok(pl_db_savepoint(db, &e) == -1 && errno == ENOSPC,
       "... a savepoint too");
    errno = 0;
    ok(pl_db_commit(db, &e) == -1 && errno == ENOSPC,
       "... a retry while still full fails: %s", e.text);
    is(pl_db_unstored(db), 5, "... and keeps the journal");
    is(pl_db_task_state(db, b, &e), PL_ST_QUEUED, "... task b still queued");

    /* the space comes back */
    sqlite3_exec(h, "PRAGMA max_page_count = 1000000", NULL, NULL, NULL);
    is(pl_db_commit(db, &e), 0, "limit: the retry stores the journal");
    ok(pl_db_failed(db, &why) == 0 && why == NULL && pl_db_unstored(db) == 0,
       "... not failed, the journal empty");
    is(pl_db_task_state(db, a, &e), PL_ST_ASSIGNED, "... task a assigned");
    is(pl_db_task_state(db, b, &e), PL_ST_CANCELED, "... task b canceled");
    is(t_db_count(h, "SELECT count(*) FROM events WHERE task = 1 AND "
                     "rank = 0 AND length(detail) = 5999"),
       1, "... with the rank event that did not fit");
    t_db_scalar(h, "SELECT state || ' ' || joined || ' ' || last_seen "
                   "FROM nodes WHERE name = 'n1'", buf, sizeof(buf));
    is_str(buf, "up 22.0 24.0",
           "... node n1 up, joined at its first write, last seen at its last");
    t_db_scalar(h, "SELECT value FROM meta WHERE key = 'job'", buf,
                sizeof(buf));
    is_str(buf, "8", "... meta job is the last value");
    char rec[256];
    t_db_scalar(h, "SELECT value FROM meta WHERE key = 'store_failure'", rec,
                sizeof(rec));
    unsigned long long t0 = 0, t1 = 0;
    int off = 0;
    ok(sscanf(rec, "%llu %llu %n", &t0, &t1, &off) == 2 && t0 > 0
           && t1 >= t0 && strstr(rec + off, "full"),
       "... meta store_failure says when and why: %s", rec);
    is(pl_db_commit(db, &e), 0, "limit: a commit with nothing open");
    pl_db_close(db);
}

/* The tasks of a failed commit's submissions are gone with it; their
 * ids are free again.  A write for them in the journal (the scheduler
 * assigned one in the same batch) must not land on the next task that
 * gets the id. */
static void journal_undone(struct pl_db *db)
{
    struct pl_error e;

    /* first stored: task 1 */
    uint64_t keep = insert(db, "keep", 1, 30);
    is(pl_db_commit(db, &e), 0, "undone: task %llu stored",
       (unsigned long long)keep);
    /* a batch: a submission, its assignment, a change of task 1 */
    uint64_t gone = insert(db, "gone", 1, 31);
    change(db, gone, PL_ST_ASSIGNED, 1, 32, "n1", "0", NULL, -1, -1, -1);
    rank_ev(db, gone, 0, PL_ST_ASSIGNED, 32, "n1", NULL);
    change(db, keep, PL_ST_ASSIGNED, 1, 33, "n1", "1", NULL, -1, -1, -1);
    is(pl_db_unstored(db), 3, "undone: 3 writes journaled (not the insert)");
}

/* A real full filesystem (a 1 MiB tmpfs, in a mount namespace of our
 * own so nothing is left mounted; without the privilege, a file size
 * limit): the COMMIT fails, the retry after the space returns stores
 * the journal. */
static void journal_full(const char *dir)
{
    char mnt[128], path[160], filler[160];
    struct pl_error e = { "" };
    struct pl_db *db;
    sqlite3 *h;
    bool tmpfs = false;
    struct rlimit old_lim;

    snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
    mkdir(mnt, 0700);
    if (unshare(CLONE_NEWNS) == 0
        && mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0
        && mount("tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0700") == 0)
        tmpfs = true;
    else
        diag("no tmpfs (%s): a file size limit fills the disk instead",
             strerror(errno));
    snprintf(path, sizeof(path), "%s/state.db", mnt);
    snprintf(filler, sizeof(filler), "%s/filler", mnt);
    if (!(db = pl_db_open(path, &e))) {
        diag("%s", e.text);
        return;
    }
    h = pl_db_handle(db);
    journal_undone(db);

    /* fill it */
    getrlimit(RLIMIT_FSIZE, &old_lim);
    if (tmpfs) {
        int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        static char block[65536];
        ssize_t w = 0;
        while (fd >= 0 && (w = write(fd, block, sizeof(block))) > 0)
            ;
        ok(fd >= 0 && w < 0 && errno == ENOSPC,
           "full: the tmpfs is filled up (%s)", strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    else {
        struct stat sb;
        char wal[200];
        snprintf(wal, sizeof(wal), "%s-wal", path);
        stat(wal, &sb);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = { (rlim_t)sb.st_size, old_lim.rlim_max };
        ok(setrlimit(RLIMIT_FSIZE, &lim) == 0,
           "full: files may not grow past the WAL's %lld bytes",
           (long long)sb.st_size);
    }
    errno = 0;
    e.text[0] = '\0';
    int rc = pl_db_commit(db, &e);
    int err = errno;
    /* N.B. EFBIG (the limit) is not ENOSPC: SQLite says "I/O error" */
    ok(rc == -1 && (err == ENOSPC || (!tmpfs && err != 0)),
       "full: the COMMIT fails: %s (%s)", e.text, strerror(err));
    ok(pl_db_failed(db, NULL) == err && pl_db_unstored(db) == 3,
       "... failed, 3 writes wait");
    is(t_db_count(h, "SELECT count(*) FROM tasks"), 1,
       "... the submission of the batch is gone with it");
    uint64_t id = 0;
    struct pl_db_task row;
    struct pl_spec spec;
    ok(pl_db_task_insert(db, row_of(&row, &spec, argv_x), PL_ST_QUEUED, 34,
                         &id, &e) == -1 && id == 0,
       "... a new one is refused");
    ok(pl_db_commit(db, &e) == -1, "... the retry fails while full");
    /* the space returns */
    if (tmpfs)
        unlink(filler);
    else
        setrlimit(RLIMIT_FSIZE, &old_lim);
    is(pl_db_commit(db, &e), 0, "full: the retry stores the journal once "
       "there is space");
    is(pl_db_task_state(db, 1, &e), PL_ST_ASSIGNED, "... task 1 assigned");
    is(t_db_count(h, "SELECT count(*) FROM events WHERE task = 2"), 0,
       "... no event of the undone task 2");
    uint64_t next = insert(db, "next", 1, 40);
    is(pl_db_commit(db, &e), 0, "... a new submission is stored");
    ok(next == 2
           && t_db_count(h, "SELECT count(*) FROM events WHERE task = 2") == 1,
       "... it reuses the free id 2 with its one event, none of the undone "
       "task's");
    pl_db_close(db);
    /* what the retry stored is on disk */
    db = pl_db_open(path, &e);
    ok(db && pl_db_task_state(db, 1, &e) == PL_ST_ASSIGNED
           && pl_db_task_state(db, 2, &e) == PL_ST_QUEUED,
       "full: after a reopen task 1 is assigned, task 2 queued");
    pl_db_close(db);
    if (tmpfs)
        umount(mnt);
    t_rmtree(mnt);
}

/* A read-only database (SQLite's query_only: SQLITE_READONLY) is
 * failed with EROFS, and comes back. */
static void journal_readonly(const char *dir)
{
    char path[128];
    struct pl_error e = { "" };
    struct pl_db *db;
    sqlite3 *h;

    snprintf(path, sizeof(path), "%s/ro.db", dir);
    if (!(db = pl_db_open(path, &e))) {
        diag("%s", e.text);
        return;
    }
    h = pl_db_handle(db);
    uint64_t a = insert(db, "a", 1, 10);
    pl_db_commit(db, &e);
    sqlite3_exec(h, "PRAGMA query_only = 1", NULL, NULL, NULL);
    is(change(db, a, PL_ST_CANCELED, 0, 11, NULL, NULL, "x", -1, -1, -1), 0,
       "read-only: a change returns 0 (journaled)");
    is(pl_db_failed(db, NULL), EROFS, "... the database is failed: EROFS");
    errno = 0;
    ok(pl_db_commit(db, &e) == -1 && errno == EROFS,
       "... the retry fails: %s", e.text);
    sqlite3_exec(h, "PRAGMA query_only = 0", NULL, NULL, NULL);
    is(pl_db_commit(db, &e), 0, "read-only: writable again, stored");
    is(pl_db_task_state(db, a, &e), PL_ST_CANCELED, "... task a canceled");

    /* writes that fail for what they are do not fail the database: a
     * change of no task is dropped when the batch is written (logged) */
    ok(change(db, 99, PL_ST_DONE, 1, 12, NULL, NULL, NULL, 0, -1, -1) == 0
           && pl_db_commit(db, &e) == 0 && pl_db_unstored(db) == 0
           && pl_db_failed(db, NULL) == 0
           && t_db_count(h, "SELECT count(*) FROM events WHERE task = 99")
                  == 0,
       "a change of no task: dropped with its event, not failed");
    /* the journal forgets a savepoint rolled back */
    change(db, a, PL_ST_CANCELED, 0, 13, NULL, NULL, "y", -1, -1, -1);
    is(pl_db_savepoint(db, &e), 0, "savepoint");
    change(db, a, PL_ST_CANCELED, 0, 14, NULL, NULL, "z", -1, -1, -1);
    pl_db_node_set(db, "n2", "0", NULL, "up", 14, &e);
    is(pl_db_unstored(db), 3, "... 3 writes journaled");
    is(pl_db_savepoint_end(db, false, &e), 0, "... rolled back");
    is(pl_db_unstored(db), 1, "... the journal keeps the write before it");
    pl_db_rollback(db);
    is(pl_db_unstored(db), 0, "rollback empties the journal");
    pl_db_close(db);
}

/* Arrays (ID means every element, ID.N one), tags and the failed
 * elements of an array, on a database of its own. */
static void arrays_tags(const char *dir)
{
    char path[300];
    struct pl_error e = { "" };
    struct pl_db *db;
    uint64_t id, first = 0, *out = NULL, *idx = NULL, n = 0, live = 0;
    size_t nout = 0;

    snprintf(path, sizeof(path), "%s/arrays.db", dir);
    if (!ok((db = pl_db_open(path, &e)) != NULL, "arrays: open")) {
        diag("%s", e.text);
        return;
    }
    /* array of indexes 0, 2, 4 (ids 1-3), then task 4 with tags */
    for (uint64_t k = 0; k < 3; k++) {
        struct pl_spec ds = { .argv = argv_x, .ranks = 1, .cpr = 1,
                              .priority = 7 };
        struct pl_db_task dt = { .spec = &ds, .array_id = first,
                                 .array_index = 2 * k };
        pl_db_task_insert(db, &dt, PL_ST_QUEUED, 1.0, &id, &e);
        if (k == 0) {
            pl_db_task_array(db, id, 0, &e);
            first = id;
        }
    }
    char *tags[] = { (char *)"model=lstm", (char *)"k.v=1", NULL };
    struct pl_spec ts = { .argv = argv_y, .ranks = 1, .cpr = 1,
                          .tags = tags };
    pl_db_task_insert(db, &(struct pl_db_task){ .spec = &ts }, PL_ST_QUEUED,
                      1.0, &id, &e);
    change(db, 2, PL_ST_FAILED, 1, 2.0, NULL, NULL, "exit 1", 1, -1, -1);
    pl_db_commit(db, &e);
    sqlite3 *h = pl_db_handle(db);

    const uint64_t ids[] = { 1, 4, 2, 9 }, elems[] = { 1, 4, 1, 0 };
    ok(pl_query_resolve(h, ids, 4, elems, 2, true, &out, &nout, &e) == 0
           && nout == 5 && out[0] == 1 && out[1] == 2 && out[2] == 3
           && out[3] == 4 && out[4] == 9,
       "resolve 1 4 2 9 1.4 1.0: the array 1 2 3, then 4, 9 (unknown, "
       "kept), each once (%zu)", nout);
    free(out);
    const uint64_t missing[] = { 1, 1 }, plain[] = { 4, 0 };
    ok(pl_query_resolve(h, NULL, 0, missing, 1, true, &out, &nout, &e) < 0
           && errno == ENOENT && strstr(e.text, "no task 1.1"),
       "resolve 1.1 (no index 1): %s", e.text);
    ok(pl_query_resolve(h, NULL, 0, plain, 1, true, &out, &nout, &e) < 0
           && errno == ENOENT,
       "resolve 4.0 (4 is no array): %s", e.text);

    const char *lstm[] = { "model=lstm", NULL }, *cnn[] = { "model=cnn",
                                                            NULL };
    const char *has[] = { "k.v", "model", NULL };
    json_t *j = pl_query_tasks(h, NULL, lstm, NULL, 0, 0, &e);
    ok(json_array_size(j) == 1
           && jint(json_array_get(j, 0), "id") == 4
           && !strcmp(json_string_value(json_object_get(
                          json_object_get(json_array_get(j, 0), "tags"),
                          "model")), "lstm"),
       "tag model=lstm: task 4, its tags an object");
    json_decref(j);
    j = pl_query_tasks(h, NULL, cnn, NULL, 0, 0, &e);
    ok(j && json_array_size(j) == 0, "tag model=cnn: none");
    json_decref(j);
    j = pl_query_tasks(h, "queued", has, ids, 4, 0, &e);
    ok(json_array_size(j) == 1 && jint(json_array_get(j, 0), "id") == 4,
       "tags k.v and model (any value), queued, among ids: task 4");
    json_decref(j);
    j = pl_query_tasks(h, NULL, NULL, ids, 1, 0, &e);
    ok(json_array_size(j) == 1
           && jint(json_array_get(j, 0), "priority") == 7
           && jint(json_array_get(j, 0), "array_id") == 1
           && json_object_size(json_object_get(json_array_get(j, 0),
                                               "tags")) == 0,
       "task 1: priority 7, array 1, tags {}");
    json_decref(j);

    const uint64_t cids[] = { 2, 4, 1, 9, 1 };
    j = pl_query_counts(h, cids, 5, &e);
    ok(jint(j, "total") == 4 && jint(j, "failed") == 1
           && jint(j, "queued") == 3
           && json_array_size(json_object_get(j, "unknown")) == 1,
       "counts 2 4 1 9 1: array 1 once (its element 2 too), 4; 9 unknown");
    json_decref(j);
    ok(pl_db_array_failed(db, 1, &idx, &n, &live, &e) == 3 && n == 1
           && idx[0] == 2 && live == 2,
       "array 1: 3 elements, index 2 failed, 2 not ended");
    free(idx);
    ok(pl_db_array_failed(db, 4, &idx, &n, &live, &e) == 0,
       "task 4 is not an array");
    free(idx);
    pl_db_close(db);
    unlink(path);
}

/* A Python call's input (written at submit, read at dispatch) and its
 * result: stored, replaced by a later attempt's, journaled while the
 * database cannot be written, and as show gives it. */
static void pycall_rows(const char *dir)
{
    char path[300];
    struct pl_error e = { "" };
    struct pl_db *db;
    struct pl_db_pyinput in;
    uint64_t id = 0;

    snprintf(path, sizeof(path), "%s/pycall.db", dir);
    if (!ok((db = pl_db_open(path, &e)) != NULL, "pycall: open")) {
        diag("%s", e.text);
        return;
    }
    char *argv[] = { (char *)"label", NULL };
    struct pl_spec s = { .argv = argv, .ranks = 1, .cpr = 1,
                         .fn = PL_FN_PYCALL, .input = (unsigned char *)"\x80\0x",
                         .ninput = 3 };
    struct pl_db_task t = { .spec = &s };
    ok(pl_db_task_insert(db, &t, PL_ST_QUEUED, 1.0, &id, &e) == 0
           && pl_db_pyinput_add(db, id, &s, "import os", "/usr/bin/python3",
                                &e) == 0
           && pl_db_commit(db, &e) == 0,
       "pycall: a call and its input stored (%s)", e.text);
    ok(pl_db_pyinput_get(db, id, &in, &e) == 0 && in.ninput == 3
           && !memcmp(in.input, "\x80\0x", 3) && !in.input_file
           && !strcmp(in.prelude, "import os")
           && !strcmp(in.python, "/usr/bin/python3"),
       "pycall: its input read back, the pilot's defaults filled in");
    pl_db_pyinput_clear(&in);
    errno = 0;
    ok(pl_db_pyinput_get(db, id + 1, &in, &e) < 0 && errno == ENOENT,
       "pycall: no input of a task that is not a call: ENOENT");
    struct pl_db_result r = { .id = id, .attempt = 1, .status = PL_PYR_OK,
                              .size = 4, .data = (const unsigned char *)"abcd",
                              .ndata = 4, .repr = "'abcd'" };
    sqlite3 *h = pl_db_handle(db);
    sqlite3_exec(h, "PRAGMA query_only = 1", NULL, NULL, NULL);
    is(pl_db_result_set(db, &r, &e), 0, "pycall: a result while the "
       "database cannot be written: journaled");
    ok(pl_db_commit(db, &e) < 0, "... its commit fails");
    sqlite3_exec(h, "PRAGMA query_only = 0", NULL, NULL, NULL);
    ok(pl_db_commit(db, &e) == 0, "... the retry stores it (%s)", e.text);
    json_t *j = pl_query_task(h, id, &e);
    ok(j && !strcmp(jstr(j, "result_status"), "ok")
           && jint(j, "result_size") == 4
           && !strcmp(jstr(j, "result"), "YWJjZA==")
           && !strcmp(jstr(j, "result_repr"), "'abcd'")
           && !json_object_get(j, "result_file")
           && !strcmp(jstr(j, "fn"), "pycall"),
       "pycall: show gives its result, base64");
    json_decref(j);
    r = (struct pl_db_result){ .id = id, .attempt = 2,
                               .status = PL_PYR_RAISED, .size = 70000,
                               .file = "/p/tasks/0/1.2.result" };
    ok(pl_db_result_set(db, &r, &e) == 0 && pl_db_commit(db, &e) == 0
           && (j = pl_query_task(h, id, &e))
           && !strcmp(jstr(j, "result_status"), "raised")
           && !strcmp(jstr(j, "result_file"), "/p/tasks/0/1.2.result")
           && !json_object_get(j, "result"),
       "pycall: a later attempt's result, in a file, replaces it");
    json_decref(j);
    pl_db_close(db);
}

/* pl_db_load_live()'s callback: the refs of task *arg's row. */
static int refs_cb(struct pl_db_row *row, void *arg)
{
    uint64_t *want = arg;

    if (row->id == want[0])
        want[1] = row->nrefs;
    return 0;
}

/* A call's refs: checked to be calls at submit, stored with its input,
 * read back at dispatch with each one's result as it is now; many
 * results in one read (RESULTS), cut at a budget. */
static void refs_rows(const char *dir)
{
    char path[300];
    struct pl_error e = { "" };
    struct pl_db *db;
    struct pl_db_pyinput in;
    uint64_t a = 0, b = 0, cmd = 0, c = 0;
    char *argv[] = { (char *)"label", NULL };
    struct pl_spec s = { .argv = argv, .ranks = 1, .cpr = 1,
                         .fn = PL_FN_PYCALL, .input = (unsigned char *)"\x80",
                         .ninput = 1 };
    struct pl_spec sc = { .argv = argv, .ranks = 1, .cpr = 1 };
    struct pl_db_task t = { .spec = &s }, tc = { .spec = &sc };

    snprintf(path, sizeof(path), "%s/refs.db", dir);
    /* a pyinputs table of schema 9, without refs: the column is added */
    sqlite3 *old;
    ok(sqlite3_open(path, &old) == SQLITE_OK
           && sqlite3_exec(old, "CREATE TABLE pyinputs (task INTEGER PRIMARY "
                                "KEY, input BLOB, input_file TEXT, prelude "
                                "TEXT, python TEXT)", NULL, NULL, NULL)
                  == SQLITE_OK,
       "refs: a database of schema 9's pyinputs");
    sqlite3_close(old);
    if (!ok((db = pl_db_open(path, &e)) != NULL,
            "refs: it opens as schema 10 (%s)", e.text))
        return;
    sqlite3 *h = pl_db_handle(db);
    is(t_db_count(h, "SELECT count(refs) FROM pyinputs"), 0,
       "refs: ... pyinputs has its refs column");
    ok(pl_db_task_insert(db, &t, PL_ST_DONE, 1.0, &a, &e) == 0
           && pl_db_pyinput_add(db, a, &s, NULL, NULL, &e) == 0
           && pl_db_task_insert(db, &t, PL_ST_DONE, 1.0, &b, &e) == 0
           && pl_db_pyinput_add(db, b, &s, NULL, NULL, &e) == 0
           && pl_db_task_insert(db, &tc, PL_ST_DONE, 1.0, &cmd, &e) == 0,
       "refs: two calls and a command stored (%s)", e.text);
    uint64_t good[] = { a, b }, bad1[] = { a, cmd }, bad2[] = { 999999 };
    ok(pl_db_refs_check(db, good, 2, &e) == 0, "refs: two calls pass");
    ok(pl_db_refs_check(db, bad1, 2, &e) < 0 && errno == EINVAL
           && strstr(e.text, "is not a Python call"),
       "refs: a command refused (%s)", e.text);
    ok(pl_db_refs_check(db, bad2, 1, &e) < 0 && errno == EINVAL
           && !strcmp(e.text, "refs: no task 999999"),
       "refs: an unknown task refused (%s)", e.text);
    struct pl_db_result r = { .id = a, .attempt = 1, .status = PL_PYR_OK,
                              .size = 4, .data = (const unsigned char *)"abcd",
                              .ndata = 4 };
    ok(pl_db_result_set(db, &r, &e) == 0, "refs: a's result, inline");
    uint64_t refs[] = { a, b };
    struct pl_dep after[] = { { .id = a }, { .id = b } };
    s.refs = refs;
    s.nrefs = 2;
    s.after = after;
    s.nafter = 2;
    ok(pl_db_task_insert(db, &t, PL_ST_WAITING, 1.0, &c, &e) == 0
           && pl_db_pyinput_add(db, c, &s, NULL, NULL, &e) == 0
           && pl_db_commit(db, &e) == 0,
       "refs: a call of refs a and b stored (%s)", e.text);
    ok(pl_db_pyinput_get(db, c, &in, &e) == 0 && in.nrefs == 2
           && in.refs[0].id == a && in.refs[0].status == PL_PYR_OK
           && in.refs[0].ndata == 4 && !memcmp(in.refs[0].data, "abcd", 4)
           && in.refs[1].id == b && in.refs[1].status == PL_PYR_NONE
           && !in.refs[1].data && !in.refs[1].file,
       "refs: read back at dispatch, a's result inline, b's none yet");
    pl_db_pyinput_clear(&in);
    r = (struct pl_db_result){ .id = b, .attempt = 1, .status = PL_PYR_OK,
                               .size = 70000, .file = "/p/tasks/0/2.result" };
    ok(pl_db_result_set(db, &r, &e) == 0 && pl_db_commit(db, &e) == 0
           && pl_db_pyinput_get(db, c, &in, &e) == 0 && in.nrefs == 2
           && in.refs[1].status == PL_PYR_OK && !in.refs[1].data
           && !strcmp(in.refs[1].file, "/p/tasks/0/2.result"),
       "refs: b's result in a file, its path");
    pl_db_pyinput_clear(&in);
    uint64_t want[2] = { c, 0 };
    ok(pl_db_load_live(db, refs_cb, want, &e) == 0 && want[1] == 2,
       "refs: a restarted pilotd counts the refs of a waiting call");
    uint64_t q[] = { b, 424242, a, cmd };
    json_t *j = pl_query_results(h, q, 4, 1 << 20, &e), *x;
    ok(json_array_size(j) == 4
           && jint(json_array_get(j, 0), "id") == (json_int_t)b
           && !strcmp(jstr(json_array_get(j, 0), "result_file"),
                      "/p/tasks/0/2.result")
           && jint(json_array_get(j, 0), "size") == 70000
           && json_is_null(json_object_get(json_array_get(j, 1), "status"))
           && !strcmp(jstr(json_array_get(j, 2), "status"), "ok")
           && !strcmp(jstr(json_array_get(j, 2), "result"), "YWJjZA==")
           && json_is_null(json_object_get(json_array_get(j, 3), "status")),
       "results: in the ids' order; none (unknown, a command): null");
    json_decref(j);
    q[0] = a;
    q[2] = a;
    j = pl_query_results(h, q, 3, 10, &e);
    x = json_array_get(j, 1);
    ok(json_array_size(j) == 3
           && !strcmp(jstr(json_array_get(j, 0), "result"), "YWJjZA==")
           && json_is_true(json_object_get(x, "more"))
           && !json_object_get(x, "status")
           && jint(x, "id") == 424242
           && json_is_true(json_object_get(json_array_get(j, 2), "more")),
       "results: over the budget, the first whole, the rest 'more'");
    json_decref(j);
    pl_db_close(db);
}

static void journal(void)
{
    char dir[64];

    if (!t_tmpdir("journal", dir, sizeof(dir)))
        return;
    journal_page_limit(dir);
    journal_readonly(dir);
    pycall_rows(dir);
    refs_rows(dir);
    journal_full(dir); /* last: it may leave our mount namespace private */
    t_rmtree(dir);
}

int main(void)
{
    char path[128], buf[64];
    struct pl_error e = { "" };
    struct pl_db *db;
    sqlite3 *h;

    plan(192);
    if (!t_tmpdir("db", tmp, sizeof(tmp)))
        return 1;
    snprintf(path, sizeof(path), "%s/state.db", tmp);

    /* open */
    db = pl_db_open(path, &e);
    if (!ok(db != NULL, "pl_db_open creates %s", path)) {
        diag("%s", e.text);
        return 1;
    }
    h = pl_db_handle(db);
    t_db_scalar(h, "PRAGMA journal_mode", buf, sizeof(buf));
    is_str(buf, "wal", "journal_mode is WAL");
    is(t_db_count(h, "PRAGMA synchronous"), 1, "synchronous is NORMAL");
    is(t_db_count(h, "PRAGMA journal_size_limit"), 4194304,
       "the WAL is cut back to 4 MiB after a checkpoint");
    is(t_db_count(h, "PRAGMA wal_autocheckpoint"), 1000,
       "SQLite checkpoints at 1000 pages (pilotd more often)");
    is(pl_db_checkpoint(db, &e), 0, "pl_db_checkpoint");
    is(t_db_count(h, "SELECT count(*) FROM sqlite_master WHERE type = "
                     "'table' AND name IN ('tasks', 'events', 'nodes', "
                     "'meta')"),
       4, "tables tasks, events, nodes, meta");
    t_db_scalar(h, "SELECT value FROM meta WHERE key = 'schema'", buf,
                sizeof(buf));
    char schema[16];
    snprintf(schema, sizeof(schema), "%d", PL_SCHEMA_VERSION);
    is_str(buf, schema, "meta schema = PL_SCHEMA_VERSION");
    is(pl_db_in_txn(db), 0, "no transaction open after open");

    /* reader on the same file, as the CLI opens it */
    sqlite3 *q = pl_query_open(path, &e);
    ok(q != NULL, "pl_query_open read-only");
    char *msg = NULL;
    ok(sqlite3_exec(q, "INSERT INTO meta VALUES ('x', 'y')", NULL, NULL, &msg)
           == SQLITE_READONLY,
       "... writes through it are refused");
    sqlite3_free(msg);

    /* insert, group commit */
    uint64_t id[8] = { 0 };
    for (int i = 1; i <= 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "t%d", i);
        id[i] = insert(db, name, (uint32_t)i, 100.0 + i);
    }
    ok(id[1] == 1 && id[5] == 5, "ids 1..5");
    is(pl_db_in_txn(db), 1, "writes opened a transaction");
    is(t_db_count(q, "SELECT count(*) FROM tasks"), 0,
       "a reader does not see the open transaction");
    json_t *c = pl_query_counts(h, NULL, 0, &e);
    is(jint(c, "total"), 5, "the writer's own connection sees it");
    json_decref(c);
    is(pl_db_commit(db, &e), 0, "commit");
    is(pl_db_in_txn(db), 0, "... transaction closed");
    is(t_db_count(q, "SELECT count(*) FROM tasks"), 5,
       "the reader sees 5 tasks");
    is(t_db_count(q, "SELECT count(*) FROM events"), 5, "... and 5 events");
    is(pl_db_commit(db, &e), 0, "commit with nothing open");

    /* state changes */
    is(pl_db_task_state(db, 1, &e), PL_ST_QUEUED, "task 1 queued");
    is(pl_db_task_state(db, 99, &e), 0, "task 99 unknown: 0");
    int rc = 0;
    rc |= change(db, 1, PL_ST_ASSIGNED, 1, 110, "n1", "0,1", NULL, -1, -1, -1);
    rc |= change(db, 1, PL_ST_RUNNING, 1, 111, NULL, NULL, NULL, -1, -1, -1);
    rc |= change(db, 1, PL_ST_DONE, 1, 116, NULL, NULL, NULL, 0, -1, 2048);
    rc |= change(db, 2, PL_ST_ASSIGNED, 1, 110, "n2", "3", NULL, -1, -1, -1);
    rc |= change(db, 2, PL_ST_RUNNING, 1, 112, NULL, NULL, NULL, -1, -1, -1);
    rc |= change(db, 2, PL_ST_FAILED, 1, 113, NULL, NULL, "exit code 3", 3, -1,
                 -1);
    rc |= change(db, 3, PL_ST_CANCELED, 0, 114, NULL, NULL, "canceled by user",
                 -1, -1, -1);
    rc |= change(db, 4, PL_ST_ASSIGNED, 1, 115, "n1", "2,3", NULL, -1, -1, -1);
    rc |= change(db, 4, PL_ST_RUNNING, 1, 116, NULL, NULL, NULL, -1, -1, -1);
    is(rc, 0, "9 state changes");
    is(pl_db_task_state(db, 1, &e), PL_ST_DONE, "task 1 done");
    is(pl_db_task_state(db, 2, &e), PL_ST_FAILED, "task 2 failed");
    is(pl_db_task_state(db, 3, &e), PL_ST_CANCELED, "task 3 canceled");
    is(pl_db_task_state(db, 4, &e), PL_ST_RUNNING, "task 4 running");
    is(pl_db_commit(db, &e), 0, "commit");
    is(t_db_count(h, "SELECT count(*) FROM events WHERE task = 1"), 4,
       "task 1 has 4 events");

    /* savepoints */
    is(pl_db_savepoint(db, &e), 0, "savepoint (opens the transaction)");
    is(pl_db_in_txn(db), 1, "... in a transaction");
    change(db, 5, PL_ST_CANCELED, 0, 120, NULL, NULL, "x", -1, -1, -1);
    is(pl_db_task_state(db, 5, &e), PL_ST_CANCELED, "inside: task 5 canceled");
    is(pl_db_savepoint_end(db, false, &e), 0, "savepoint rolled back");
    is(pl_db_task_state(db, 5, &e), PL_ST_QUEUED, "... task 5 queued again");
    is(t_db_count(h, "SELECT count(*) FROM events WHERE task = 5"), 1,
       "... its event is gone");
    is(pl_db_in_txn(db), 1, "... the transaction is still open");

    id[6] = insert(db, "t6", 1, 130); /* before the next savepoint */
    is(pl_db_savepoint(db, &e), 0, "savepoint");
    id[7] = insert(db, "t7", 1, 131);
    is(pl_db_savepoint_end(db, true, &e), 0, "savepoint kept");
    is(pl_db_savepoint(db, &e), 0, "savepoint");
    change(db, 6, PL_ST_CANCELED, 0, 132, NULL, NULL, "x", -1, -1, -1);
    uint64_t gone = insert(db, "gone", 1, 133);
    is(pl_db_savepoint_end(db, false, &e), 0, "savepoint rolled back");
    is(pl_db_commit(db, &e), 0, "commit");
    ok(id[6] == 6 && id[7] == 7, "tasks 6 and 7 inserted");
    is(pl_db_task_state(db, 6, &e), PL_ST_QUEUED,
       "write before the rolled-back savepoint kept (6 queued)");
    is(pl_db_task_state(db, 7, &e), PL_ST_QUEUED,
       "write in the kept savepoint committed (7 queued)");
    is(pl_db_task_state(db, gone, &e), 0,
       "insert in the rolled-back savepoint gone");

    /* rollback and an uncommitted close */
    uint64_t r = insert(db, "rolled", 1, 140);
    pl_db_rollback(db);
    is(pl_db_in_txn(db), 0, "rollback closes the transaction");
    is(pl_db_task_state(db, r, &e), 0, "... the insert is gone");
    pl_db_rollback(db); /* nothing open: harmless */

    /* a constraint error fails one statement, not the batch */
    struct pl_spec bad = { .name = (char *)"bad", .argv = NULL };
    uint64_t bid = 0;
    errno = 0;
    e.text[0] = '\0';
    ok(pl_db_task_insert(db, &(struct pl_db_task){ .spec = &bad },
                         PL_ST_QUEUED, 160, &bid, &e) == -1
           && errno == EINVAL && e.text[0],
       "insert without argv: -1, EINVAL: %s", e.text);
    ok(bid == 0 && pl_db_in_txn(db) == 1,
       "... no id, the transaction stays open");

    /* nodes */
    is(pl_db_node_set(db, "n1", "0,1,2,3", "0,1", "up", 100, &e), 0,
       "node n1 up");
    is(pl_db_node_set(db, "n0", "0,1", NULL, "up", 101, &e), 0, "node n0 up");
    is(pl_db_node_set(db, "n1", NULL, NULL, "lost", 200, &e), 0,
       "node n1 lost (cores, gpus unchanged)");
    is(pl_db_meta_set(db, "pilot", "p7", &e), 0, "meta pilot = p7");
    is(pl_db_commit(db, &e), 0, "commit");

    uint64_t lost = insert(db, "lost", 1, 150); /* never committed */
    pl_db_close(db);
    db = pl_db_open(path, &e);
    ok(db != NULL, "reopen");
    h = pl_db_handle(db);
    is(pl_db_task_state(db, lost, &e), 0,
       "an insert not committed before close is gone");
    t_db_scalar(h, "SELECT value FROM meta WHERE key = 'pilot'", buf,
                sizeof(buf));
    is_str(buf, "p7", "meta survives reopen");

    /* the live tasks */
    struct live l = { 0 };
    is(pl_db_load_live(db, live_cb, &l, &e), 0, "pl_db_load_live");
    ok(l.n == 4 && l.id[0] == 4 && l.id[1] == 5 && l.id[2] == 6
           && l.id[3] == 7,
       "live tasks 4, 5, 6, 7, oldest first (%d)", l.n);
    ok(l.state[0] == PL_ST_RUNNING && l.state[1] == PL_ST_QUEUED,
       "... with their states");
    is(l.attempts[0], 1, "... task 4: 1 attempt");
    ok(!strcmp(l.name[0], "t4") && l.argv[0][0]
           && !strcmp(l.argv[0][0], "sleep") && l.argv[0][1]
           && !strcmp(l.argv[0][1], "1") && !l.argv[0][2] && l.env[0][0]
           && !strcmp(l.env[0][0], "A=1") && l.env[0][1]
           && !strcmp(l.env[0][1], "B=two") && !l.env[0][2]
           && !strcmp(l.cwd[0], "/work"),
       "... task 4: name, argv, env, cwd");
    ok(l.ranks[0] == 1 && l.cpr[0] == 4 && l.gpr[0] == 0 && l.retries[0] == 2
           && l.timeout[0] == 30.5,
       "... task 4: ranks 1, cores 4, gpus 0, retries 2, timeout 30.5");
    struct live l2 = { .fail_at = 2 };
    e.text[0] = '\0';
    ok(pl_db_load_live(db, live_cb, &l2, &e) == -1 && l2.n == 1 && e.text[0],
       "a failing callback stops the load: %s", e.text);
    live_free(&l);
    live_free(&l2);

    /* queries, on the reader */
    json_t *all = pl_query_tasks(q, NULL, NULL, NULL, 0, 0, &e);
    const json_int_t ids7[] = { 1, 2, 3, 4, 5, 6, 7 };
    ok(ids_are(all, ids7, 7), "pl_query_tasks: all 7, oldest first");
    json_t *t1 = find_id(all, 1), *t2 = find_id(all, 2), *t4 = find_id(all, 4);
    is_str(jstr(t1, "state"), "done", "task 1 state done");
    is_str(jstr(t1, "node"), "n1", "task 1 node n1");
    json_t *want = json_pack("[ii]", 0, 1);
    ok(json_equal(json_object_get(t1, "cores"), want), "task 1 cores [0, 1]");
    json_decref(want);
    want = json_pack("[ss]", "sleep", "1");
    ok(json_equal(json_object_get(t1, "argv"), want),
       "task 1 argv [\"sleep\", \"1\"]");
    json_decref(want);
    ok(json_is_integer(json_object_get(t1, "exit_code"))
           && jint(t1, "exit_code") == 0 && jint(t1, "maxrss_kb") == 2048
           && jint(t1, "attempts") == 1,
       "task 1 exit_code 0, maxrss 2048, 1 attempt");
    ok(json_real_value(json_object_get(t1, "wall")) == 5.0,
       "task 1 wall 5 s (running 111 -> done 116)");
    ok(json_real_value(json_object_get(t1, "submit_time")) == 101.0
           && json_real_value(json_object_get(t1, "end_time")) == 116.0,
       "task 1 submit and end times");
    ok(jint(t2, "exit_code") == 3 && !strcmp(jstr(t2, "reason"), "exit code 3")
           && json_is_null(json_object_get(t2, "signal")),
       "task 2 failed: exit 3, reason, no signal");
    ok(json_is_null(json_object_get(t4, "wall"))
           && json_is_null(json_object_get(t4, "end_time"))
           && json_real_value(json_object_get(t4, "start_time")) == 116.0,
       "task 4 running: start time, no end, no wall");
    ok(json_real_value(json_object_get(t4, "timeout")) == 30.5
           && jint(t4, "cores_per_rank") == 4 && jint(t4, "retries") == 2,
       "task 4 spec: timeout, cores_per_rank, retries");
    json_decref(all);

    json_t *qd = pl_query_tasks(q, "queued", NULL, NULL, 0, 0, &e);
    const json_int_t ids567[] = { 5, 6, 7 };
    ok(ids_are(qd, ids567, 3), "state filter queued: 5, 6, 7");
    json_decref(qd);
    qd = pl_query_tasks(q, "queued", NULL, NULL, 0, 2, &e);
    ok(ids_are(qd, ids567, 2), "state filter queued, limit 2: 5, 6");
    json_decref(qd);
    qd = pl_query_tasks(q, NULL, NULL, NULL, 0, 1, &e);
    ok(ids_are(qd, ids7, 1), "limit 1: task 1");
    json_decref(qd);
    qd = pl_query_tasks(q, "timeout", NULL, NULL, 0, 0, &e);
    ok(json_is_array(qd) && json_array_size(qd) == 0, "no timeout task: []");
    json_decref(qd);

    const uint64_t sel[] = { 2, 4, 99, 6 };
    const json_int_t ids246[] = { 2, 4, 6 };
    qd = pl_query_tasks(q, NULL, NULL, sel, 4, 0, &e);
    ok(ids_are(qd, ids246, 3), "ids 2, 4, 99, 6: 2, 4, 6 (99 skipped)");
    json_decref(qd);
    qd = pl_query_tasks(q, "queued", NULL, sel, 4, 0, &e);
    const json_int_t ids6[] = { 6 };
    ok(ids_are(qd, ids6, 1), "ids with state queued: 6");
    json_decref(qd);
    qd = pl_query_tasks(q, NULL, NULL, sel, 4, 2, &e);
    ok(ids_are(qd, ids246, 2), "ids with limit 2: 2, 4");
    json_decref(qd);
    /* pages: after the last task of the page before */
    const json_int_t ids67[] = { 6, 7 };
    qd = pl_query_tasks_after(q, "queued", NULL, NULL, 0, 5, 0, &e);
    ok(ids_are(qd, ids67, 2), "queued after 5: 6, 7");
    json_decref(qd);
    qd = pl_query_tasks_after(q, NULL, NULL, NULL, 0, 6, 1, &e);
    ok(ids_are(qd, ids67 + 1, 1), "after 6, limit 1: 7");
    json_decref(qd);
    const json_int_t ids46[] = { 4, 6 };
    qd = pl_query_tasks_after(q, NULL, NULL, sel, 4, 2, 0, &e);
    ok(ids_are(qd, ids46, 2), "ids 2, 4, 99, 6 after 2: 4, 6");
    json_decref(qd);
    qd = pl_query_tasks_after(q, NULL, NULL, sel, 4, 6, 0, &e);
    ok(json_is_array(qd) && json_array_size(qd) == 0,
       "ids 2, 4, 99, 6 after 6, the last: []");
    json_decref(qd);
    qd = pl_query_tasks_after(q, NULL, NULL, sel, 4, 5, 0, &e);
    ok(json_is_array(qd) && json_array_size(qd) == 0,
       "ids 2, 4, 99, 6 after 5, none of them: []");
    json_decref(qd);
    const uint64_t rev[] = { 3, 1 };
    const json_int_t ids31[] = { 3, 1 };
    qd = pl_query_tasks(q, NULL, NULL, rev, 2, 0, &e);
    if (!ok(ids_are(qd, ids31, 2),
            "ids 3, 1: in the order given, as query.h says"))
        diag("got ids %lld, %lld",
             (long long)jint(json_array_get(qd, 0), "id"),
             (long long)jint(json_array_get(qd, 1), "id"));
    json_decref(qd);

    /* one task with its events */
    json_t *t = pl_query_task(q, 1, &e);
    json_t *ev = json_object_get(t, "events");
    ok(t && json_array_size(ev) == 4, "pl_query_task 1: 4 events");
    const char *states[] = { "queued", "assigned", "running", "done" };
    bool seq = true;
    for (size_t i = 0; i < 4 && seq; i++)
        seq = !strcmp(jstr(json_array_get(ev, i), "state"), states[i]);
    ok(seq, "... queued, assigned, running, done");
    json_t *e1 = json_array_get(ev, 1);
    want = json_pack("[ii]", 0, 1);
    ok(!strcmp(jstr(e1, "node"), "n1") && jint(e1, "attempt") == 1
           && json_equal(json_object_get(e1, "cores"), want)
           && json_real_value(json_object_get(e1, "time")) == 110.0,
       "... assigned event: node n1, attempt 1, cores [0, 1], time 110");
    json_decref(want);
    want = json_pack("[ss]", "A=1", "B=two");
    ok(json_equal(json_object_get(t, "env"), want), "... env parsed");
    json_decref(want);
    json_decref(t);
    t = pl_query_task(q, 2, &e);
    ev = json_object_get(t, "events");
    ok(!strcmp(jstr(json_array_get(ev, 3), "detail"), "exit code 3"),
       "task 2: the failed event's detail is the reason");
    json_decref(t);
    errno = 0;
    ok(pl_query_task(q, 99, &e) == NULL && errno == ENOENT,
       "pl_query_task 99: ENOENT");

    /* counts */
    c = pl_query_counts(q, NULL, 0, &e);
    ok(c && jint(c, "total") == 7 && jint(c, "done") == 1
           && jint(c, "failed") == 1 && jint(c, "canceled") == 1
           && jint(c, "running") == 1 && jint(c, "queued") == 3
           && jint(c, "assigned") == 0 && jint(c, "timeout") == 0
           && jint(c, "waiting") == 0,
       "counts: 7 = 1 done + 1 failed + 1 canceled + 1 running + 3 queued");
    ok(json_is_array(json_object_get(c, "unknown"))
           && json_array_size(json_object_get(c, "unknown")) == 0,
       "... unknown []");
    json_decref(c);
    const uint64_t cid[] = { 1, 2, 99, 100, 5 };
    c = pl_query_counts(q, cid, 5, &e);
    want = json_pack("[ii]", 99, 100);
    ok(c && jint(c, "total") == 3 && jint(c, "done") == 1
           && jint(c, "failed") == 1 && jint(c, "queued") == 1
           && jint(c, "running") == 0,
       "counts of 1, 2, 99, 100, 5: total 3 (done, failed, queued)");
    ok(json_equal(json_object_get(c, "unknown"), want),
       "... unknown [99, 100]");
    json_decref(want);
    json_decref(c);
    const uint64_t none[] = { 42 };
    c = pl_query_counts(q, none, 1, &e);
    ok(c && jint(c, "total") == 0 && jint(c, "queued") == 0
           && json_array_size(json_object_get(c, "unknown")) == 1,
       "counts of an unknown id only: total 0, unknown [42]");
    json_decref(c);

    /* nodes */
    json_t *nodes = pl_query_nodes(q, &e);
    json_t *n0 = json_array_get(nodes, 0), *n1 = json_array_get(nodes, 1);
    ok(json_array_size(nodes) == 2 && !strcmp(jstr(n0, "name"), "n0")
           && !strcmp(jstr(n1, "name"), "n1"),
       "pl_query_nodes: n0, n1 (by name)");
    want = json_pack("[iiii]", 0, 1, 2, 3);
    json_t *want_g = json_pack("[ii]", 0, 1);
    ok(json_equal(json_object_get(n1, "cores"), want)
           && json_equal(json_object_get(n1, "gpus"), want_g),
       "n1 cores [0..3], gpus [0, 1] kept through the update");
    json_decref(want);
    json_decref(want_g);
    ok(!strcmp(jstr(n1, "state"), "lost")
           && json_real_value(json_object_get(n1, "joined")) == 100.0
           && json_real_value(json_object_get(n1, "last_seen")) == 200.0,
       "n1 lost, joined 100, last seen 200");
    ok(json_is_array(json_object_get(n0, "gpus"))
           && json_array_size(json_object_get(n0, "gpus")) == 0,
       "n0 without GPUs: gpus []");
    json_decref(nodes);

    /* intlist */
    json_t *il = pl_query_intlist("1,2,30");
    want = json_pack("[iii]", 1, 2, 30);
    ok(json_equal(il, want), "pl_query_intlist 1,2,30");
    json_decref(il);
    json_decref(want);
    il = pl_query_intlist(NULL);
    ok(json_is_array(il) && json_array_size(il) == 0, "pl_query_intlist NULL");
    json_decref(il);
    il = pl_query_intlist("");
    ok(json_is_array(il) && json_array_size(il) == 0, "pl_query_intlist ''");
    json_decref(il);

    /* errors */
    char nopath[128];
    snprintf(nopath, sizeof(nopath), "%s/none/state.db", tmp);
    e.text[0] = '\0';
    ok(pl_query_open(nopath, &e) == NULL && e.text[0],
       "pl_query_open of a missing file fails: %s", e.text);
    e.text[0] = '\0';
    ok(pl_db_open(nopath, &e) == NULL && e.text[0],
       "pl_db_open in a missing directory fails: %s", e.text);
    snprintf(nopath, sizeof(nopath), "%s/junk.db", tmp);
    FILE *fp = fopen(nopath, "w");
    for (int i = 0; i < 512; i++)
        fputs("this is not a database ", fp);
    fclose(fp);
    e.text[0] = '\0';
    ok(pl_db_open(nopath, &e) == NULL && e.text[0],
       "pl_db_open of a file that is not a database fails: %s", e.text);

    sqlite3_close(q);
    pl_db_close(db);
    pl_db_close(NULL);

    /* clean up */
    DIR *d = opendir(tmp);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char p[320];
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "%s/%s", tmp, de->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    arrays_tags(tmp);
    ok(rmdir(tmp) == 0, "temporary directory removed");

    journal();
    return done_testing();
}
