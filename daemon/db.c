/* daemon/db.c - SQLite state: the connection, its transactions, the journal
 * of writes not yet stored, and the writes of state changes, nodes, meta */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "daemon/db.h"
#include "daemon/db_private.h"
#include "proto/schema.h"
#include "proto/state.h"

/* bytes above which a database opened is checked in part (pl_db_open) */
#define DB_CHECK_MAX (64LL * 1024 * 1024)

static const char *sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_EVENT] = "INSERT INTO events (task, time, state, attempt, node, "
                 "cores, gpus, detail, rank) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,"
                 "?9)",
    /* the UPDATE of a task's state: db_batch.c's, one a set of columns */
    [ST_NODE] = "INSERT INTO nodes (name, cores, gpus, state, joined, "
                "last_seen) VALUES (?1,?2,?3,?4,?6,?5) ON CONFLICT(name) DO "
                "UPDATE SET cores = coalesce(?2, cores), gpus = "
                "coalesce(?3, gpus), state = ?4, last_seen = ?5",
    [ST_META] = "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
    /* schema 11: a node's cordon and vetting (daemon/vet.c) */
    [ST_NODE_VET] = "UPDATE nodes SET cordon = ?2, vet = ?3, vet_time = ?4 "
                    "WHERE name = ?1",
    [ST_STATE] = "SELECT state FROM tasks WHERE id = ?1",
    [ST_SAVE] = "SAVEPOINT req",
    [ST_RELEASE] = "RELEASE req",
    [ST_ROLLBACK_TO] = "ROLLBACK TO req",
    /* the replay of a rank event: its task may be one whose submission
     * was undone with the failed commit (its id is free again) */
    [ST_EVENT_IF] = "INSERT INTO events (task, time, state, attempt, node, "
                    "cores, gpus, detail, rank) SELECT ?1,?2,?3,?4,?5,?6,?7,"
                    "?8,?9 WHERE EXISTS (SELECT 1 FROM tasks WHERE id = ?1)",
    [ST_BY_NAME] = "SELECT max(id) FROM tasks WHERE name = ?1",
    [ST_ARRAY] = "UPDATE tasks SET array_id = ?1, array_index = ?2 "
                 "WHERE id = ?1",
    [ST_MEMBERS] = "SELECT id, state FROM tasks WHERE array_id = ?1 "
                   "ORDER BY id",
    /* a Python call's input and result (db_py.c); a result's write
     * replayed for a task whose submission was undone writes nothing */
    [ST_PYIN_ADD] = "INSERT OR REPLACE INTO pyinputs (task, input, "
                    "input_file, prelude, python, refs) VALUES (?1,?2,?3,?4,"
                    "?5,?6)",
    [ST_PYIN_GET] = "SELECT input, input_file, prelude, python, refs FROM "
                    "pyinputs WHERE task = ?1",
    [ST_REF_GET] = "SELECT status, data, file FROM results WHERE task = ?1",
    [ST_TASK_FN] = "SELECT fn FROM tasks WHERE id = ?1",
    [ST_RESULT] = "INSERT OR REPLACE INTO results (task, attempt, status, "
                  "size, data, file, repr) SELECT ?1,?2,?3,?4,?5,?6,?7 "
                  "WHERE EXISTS (SELECT 1 FROM tasks WHERE id = ?1)",
    /* a watch's replay: the index tasks_end_seq */
    [ST_ENDS] = "SELECT id, state, exit_code, signal, reason, end_time, "
                "end_seq, CASE fn WHEN 'pool' THEN 1 WHEN 'pycall' THEN 2 "
                "ELSE 0 END FROM tasks WHERE end_seq > ?1 AND "
                "end_seq <= ?2 ORDER BY end_seq LIMIT ?3",
};

/* What a failing statement is called in an error text. */
static const char *const st_name[ST_COUNT] = {
    [ST_BEGIN] = "begin", [ST_COMMIT] = "commit",
    [ST_ROLLBACK] = "rollback",
    [ST_EVENT] = "insert an event",
    [ST_NODE] = "write a node", [ST_META] = "write meta",
    [ST_STATE] = "read a task's state", [ST_SAVE] = "savepoint",
    [ST_RELEASE] = "release a savepoint",
    [ST_ROLLBACK_TO] = "roll back a savepoint",
    [ST_EVENT_IF] = "insert an event",
    [ST_BY_NAME] = "find a task by name",
    [ST_ARRAY] = "mark an array",
    [ST_MEMBERS] = "list an array",
    [ST_PYIN_ADD] = "store a call's input",
    [ST_PYIN_GET] = "read a call's input",
    [ST_RESULT] = "store a call's result",
    [ST_REF_GET] = "read a ref's result",
    [ST_TASK_FN] = "read a task's fn",
    [ST_ENDS] = "read the ends",
};

/* EROFS if the database's filesystem is read-only, ENOSPC if it is
 * full, else EIO: why a write failed, when SQLite does not say. */
static int fs_errno(const struct pl_db *db)
{
    struct statvfs sv;

    if (!db->dir[0] || statvfs(db->dir, &sv) < 0)
        return EIO;
    if (sv.f_flag & ST_RDONLY)
        return EROFS;
    if (sv.f_bfree == 0 || (geteuid() != 0 && sv.f_bavail == 0))
        return ENOSPC;
    return EIO;
}

int db_err(struct pl_db *db, struct pl_error *errp, const char *what)
{
    int rc = sqlite3_extended_errcode(db->h);
    int sys = sqlite3_system_errno(db->h);

    /* one map from SQLite codes to errno, so callers can tell a full disk
     * or a read-only directory from a bug */
    switch (rc & 0xff) {
    case SQLITE_FULL: errno = ENOSPC; break;
    case SQLITE_READONLY: errno = EROFS; break;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
        /* N.B. a failed write() is SQLITE_IOERR_WRITE unless it was
         * ENOSPC: the system's errno tells a quota or a filesystem
         * remounted read-only (after errors) from a broken disk, when
         * SQLite still has it (a rollback after a failed COMMIT may
         * clear it); else the filesystem says */
        if (sys == EDQUOT || sys == EROFS || sys == EFBIG || sys == ENOSPC)
            errno = sys;
        else
            errno = fs_errno(db);
        break;
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
    db->jtail = &db->jhead;
    db->pend = &db->jhead;
    snprintf(db->dir, sizeof(db->dir), "%s", path);
    char *slash = strrchr(db->dir, '/');
    if (slash)
        *(slash == db->dir ? slash + 1 : slash) = '\0';
    else
        snprintf(db->dir, sizeof(db->dir), ".");
    /* pilotd uses SQLite from one thread: no memory statistics (their
     * mutex was taken at every malloc), no mutex per connection.  The
     * config call fails harmlessly once SQLite is initialised. */
    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    if (sqlite3_open_v2(path, &db->h,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                            | SQLITE_OPEN_NOMUTEX,
                        NULL)
        != SQLITE_OK) {
        pl_errprintf(errp, "cannot open %s: %s", path,
                     db->h ? sqlite3_errmsg(db->h) : "out of memory");
        errno = EIO;
        goto error;
    }
    sqlite3_busy_timeout(db->h, 2000);
    /* synchronous=NORMAL: a commit is in the WAL when it returns (it
     * survives pilotd), fsync only at checkpoints (a power loss may take
     * the last commits).  The daemon checkpoints often (pl_db_checkpoint)
     * and SQLite past 1000 pages (4 MiB, its default); after a burst the
     * WAL file is cut back to 4 MiB. */
    if (exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                 "PRAGMA journal_size_limit=4194304;"
                 "PRAGMA foreign_keys=OFF;", errp) < 0)
        goto error;
    /* quick_check reads the whole file: 2.5 s a million tasks here
     * (190 MB).  A
     * large database (millions queued: a restart must serve in seconds)
     * has its small tables checked; SQLite finds a damaged page of the
     * others when it is read (pilotd then stops with the error). */
    struct stat dbst;
    bool large = stat(path, &dbst) == 0 && dbst.st_size > DB_CHECK_MAX;
    if (sqlite3_prepare_v2(db->h, large ? "PRAGMA quick_check(meta)"
                                        : "PRAGMA quick_check",
                           -1, &st, NULL)
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
    /* a database of schema 3 to 10 (a pilot of an older pilotd, resumed) */
    static const char *const v4[] = PL_SCHEMA_NEW_COLUMNS;
    for (size_t i = 0; i < sizeof(v4) / sizeof(v4[0]); i++) {
        char *msg = NULL;
        if (sqlite3_exec(db->h, v4[i], NULL, NULL, &msg) != SQLITE_OK
            && !(msg && strstr(msg, "duplicate column"))) {
            pl_errprintf(errp, "%s: upgrade the schema: %s", path,
                         msg ? msg : "out of memory");
            sqlite3_free(msg);
            errno = EIO;
            goto error;
        }
        sqlite3_free(msg);
    }
    if (exec(db, PL_SCHEMA_INDEXES, errp) < 0)
        goto error;
    for (int i = 0; i < ST_COUNT; i++) {
        if (sqlite3_prepare_v3(db->h, sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &db->st[i], NULL) != SQLITE_OK) {
            db_err(db, errp, "prepare");
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

static void journal_free(struct jent *j)
{
    while (j) {
        struct jent *next = j->next;
        free(j);
        j = next;
    }
}

/* Forget the journal: its writes are stored, or given up. */
static void journal_clear(struct pl_db *db)
{
    journal_free(db->jhead);
    db->jhead = NULL;
    db->jtail = &db->jhead;
    db->mark = NULL;
    db->jlen = 0;
    db->pend = &db->jhead;
    db->npend = 0;
}

void pl_db_close(struct pl_db *db)
{
    if (!db)
        return;
    int saved = errno;
    if (db->in_txn)
        pl_db_rollback(db);
    journal_clear(db);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(db->st[i]);
    db_batch_free(db);
    db_insert_free(db);
    sqlite3_close(db->h);
    free(db);
    errno = saved;
}

sqlite3 *pl_db_handle(struct pl_db *db)
{
    /* a read sees the batch's writes so far (a failure: the last
     * commit) */
    db_flush(db, NULL);
    return db->h;
}

int pl_db_in_txn(const struct pl_db *db)
{
    return db->in_txn;
}

int pl_db_failed(const struct pl_db *db, const char **why)
{
    if (why)
        *why = db->failed ? db->why : NULL;
    return db->failed;
}

size_t pl_db_unstored(const struct pl_db *db)
{
    return db->jlen;
}

/* Record why the writes now wait in the journal: errno and 'errp'. */
static void set_failed(struct pl_db *db, const struct pl_error *errp)
{
    int saved = errno;

    if (!db->failed)
        db->failed_at = (double)time(NULL);
    db->failed = saved ? saved : EIO;
    snprintf(db->why, sizeof(db->why), "%s",
             errp && errp->text[0] ? errp->text : strerror(db->failed));
    errno = saved;
}

/* The open transaction is lost (SQLite rolled it back on its own after
 * SQLITE_FULL or an I/O error, or we roll it back here): from now on the
 * journal is the only copy of its writes, until pl_db_commit() replays
 * it; the first events of its submissions go with them.  errno and
 * 'errp' say why. */
void db_txn_lost(struct pl_db *db, const struct pl_error *errp)
{
    int saved = errno;

    if (!sqlite3_get_autocommit(db->h))
        sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    db->in_txn = 0;
    db->mark = NULL;
    for (struct jent **pp = &db->jhead; *pp;) {
        struct jent *o = *pp;
        if (o->kind != J_FIRST) {
            pp = &o->next;
            continue;
        }
        *pp = o->next;
        if (db->jtail == &o->next)
            db->jtail = pp;
        free(o);
    }
    /* the retry writes the whole journal */
    db->pend = db->jtail;
    db->npend = 0;
    errno = saved;
    set_failed(db, errp);
}

/* Run a prepared statement to completion and reset it. */
int db_step(struct pl_db *db, int which, struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[which];
    int rc = sqlite3_step(st);

    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        struct pl_error e;
        db_err(db, &e, st_name[which]);
        if (errp)
            *errp = e;
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        if (db->in_txn && sqlite3_get_autocommit(db->h))
            db_txn_lost(db, &e);
        return -1;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return 0;
}

int db_begin(struct pl_db *db, struct pl_error *errp)
{
    if (db->in_txn)
        return 0;
    if (db_step(db, ST_BEGIN, errp) < 0)
        return -1;
    db->in_txn = 1;
    return 0;
}

void db_bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

int db_event(struct pl_db *db, int which, uint64_t id, double now,
                 int state, uint32_t attempt, const char *node,
                 const char *cores, const char *gpus, const char *detail,
                 int64_t rank, struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[which];

    if (rank >= 0)
        sqlite3_bind_int64(st, 9, rank);

    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    sqlite3_bind_double(st, 2, now);
    sqlite3_bind_text(st, 3, pl_state_name(state), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, attempt);
    db_bind_text(st, 5, node);
    db_bind_text(st, 6, cores);
    db_bind_text(st, 7, gpus);
    db_bind_text(st, 8, detail);
    return db_step(db, which, errp);
}

/* Do the write 'j' in the open transaction; 'replay': again, after a
 * failed commit. */
static int apply(struct pl_db *db, const struct jent *j, bool replay,
                 struct pl_error *errp)
{
    const struct pl_db_change *c = &j->c;
    sqlite3_stmt *st;

    switch (j->kind) {
    case J_CHANGE:
        return db_change_one(db, c, errp);
    case J_FIRST:
        return 0; /* its submission's insert is not done again either */
    case J_RANK:
        return db_event(db, replay ? ST_EVENT_IF : ST_EVENT, c->id, c->time,
                     c->state, c->attempt, c->node, c->cores, c->gpus,
                     c->reason, j->rank, errp);
    case J_NODE:
        st = db->st[ST_NODE];
        db_bind_text(st, 1, j->s[0]);
        db_bind_text(st, 2, j->s[1]);
        db_bind_text(st, 3, j->s[2]);
        db_bind_text(st, 4, j->s[3]);
        sqlite3_bind_double(st, 5, c->time);
        sqlite3_bind_double(st, 6, j->joined);
        return db_step(db, ST_NODE, errp);
    case J_META:
        st = db->st[ST_META];
        db_bind_text(st, 1, j->s[0]);
        db_bind_text(st, 2, j->s[1]);
        return db_step(db, ST_META, errp);
    case J_RESULT:
        return db_result_apply(db, j, errp);
    case J_NODE_VET:
        st = db->st[ST_NODE_VET];
        db_bind_text(st, 1, j->s[0]);
        db_bind_text(st, 2, j->s[1]);
        db_bind_text(st, 3, j->s[2]);
        if (c->time > 0)
            sqlite3_bind_double(st, 4, c->time);
        else
            sqlite3_bind_null(st, 4);
        return db_step(db, ST_NODE_VET, errp);
    }
    errno = EINVAL;
    return pl_errprintf(errp, "bad journal entry");
}

struct jent *jent_new(enum jkind kind, const char *const *v, int n)
{
    size_t len = 0, off = 0;
    struct jent *j;

    for (int i = 0; i < n; i++)
        len += v[i] ? strlen(v[i]) + 1 : 0;
    if (!(j = calloc(1, sizeof(*j) + len)))
        return NULL;
    j->kind = kind;
    for (int i = 0; i < n; i++) {
        if (!v[i])
            continue;
        size_t l = strlen(v[i]) + 1;
        memcpy(j->buf + off, v[i], l);
        j->s[i] = j->buf + off;
        off += l;
    }
    return j;
}

static struct jent *jent_change(enum jkind kind, const struct pl_db_change *c)
{
    const char *v[4] = { c->node, c->cores, c->gpus, c->reason };
    struct jent *j = jent_new(kind, v, 4);

    if (!j)
        return NULL;
    j->c = *c;
    j->c.node = j->s[0];
    j->c.cores = j->s[1];
    j->c.gpus = j->s[2];
    j->c.reason = j->s[3];
    if (c->use) {
        j->use = *c->use;
        j->c.use = &j->use;
    }
    return j;
}

/* While the commit has failed, a node's or a meta key's row is written
 * once, with its last values: an agent that registers every 2 s until
 * pilotd can welcome it would otherwise grow the journal without end.
 * Unlinks and frees the older entry of the same row, keeping what the
 * last write would not overwrite. */
static void coalesce(struct pl_db *db, struct jent *j)
{
    for (struct jent **pp = &db->jhead; *pp; pp = &(*pp)->next) {
        struct jent *o = *pp;
        if (o->kind != j->kind || strcmp(o->s[0], j->s[0]) != 0)
            continue;
        if (j->kind == J_NODE) {
            /* a NULL keeps the cores or gpus the older entry writes */
            if ((!j->s[1] && o->s[1]) || (!j->s[2] && o->s[2]))
                return;
            j->joined = o->joined;
        }
        *pp = o->next;
        if (db->jtail == &o->next)
            db->jtail = pp;
        db->jlen--;
        free(o);
        return;
    }
}

/* Keep 'j' (taken) in the journal and, unless the commit has failed, do
 * it in the open transaction.  A write that fails for what it is (no
 * such task: ENOENT; a constraint: EINVAL) is dropped and fails; one
 * that fails for the disk is kept, and the transaction is given up. */
int db_write_j(struct pl_db *db, struct jent *j, struct pl_error *errp)
{
    struct jent **slot;

    if (db->failed
        && (j->kind == J_NODE || j->kind == J_META || j->kind == J_NODE_VET))
        coalesce(db, j);
    slot = db->jtail;
    *slot = j;
    db->jtail = &j->next;
    if (j->kind != J_FIRST)
        db->jlen++; /* not a retried write */
    if (db->failed)
        return 0; /* stored by the next pl_db_commit() */
    if (j->kind == J_CHANGE || j->kind == J_RANK || j->kind == J_FIRST) {
        /* written with the batch's others (db_batch.c) */
        if (db_begin(db, errp) < 0)
            goto lost;
        j->pending = true;
        db->npend++;
        return 0;
    }
    if (db_begin(db, errp) == 0 && apply(db, j, false, errp) == 0)
        return 0;
    if (errno == ENOENT || errno == EINVAL) {
        *slot = NULL;
        db->jtail = slot;
        db->jlen--;
        free(j);
        return -1;
    }
lost:
    db_txn_lost(db, errp);
    return 0;
}

/* A full filesystem with less than this free is still full: a retry
 * waits for it (64 pages of WAL, a few batches).  Without it a retry
 * small enough for the room left in the WAL's last pages would succeed,
 * the next submission fail, and so on. */
#define ROOM (256 * 1024)

/* Whether the failed database's directory has room again; true when
 * its reason was not a full disk, or statvfs cannot say. */
static bool has_room(const struct pl_db *db)
{
    struct statvfs sv;

    if (db->failed != ENOSPC && db->failed != EFBIG)
        return true;
    if (statvfs(db->dir, &sv) < 0)
        return true;
    unsigned long long avail = geteuid() == 0 ? sv.f_bfree : sv.f_bavail;
    return avail * sv.f_frsize >= ROOM;
}

int pl_db_commit(struct pl_db *db, struct pl_error *errp)
{
    struct pl_error local;

    if (!errp)
        errp = &local; /* the reason is kept for pl_db_failed() */
    errp->text[0] = '\0';
    if (db->failed) {
        if (!has_room(db)) {
            errno = db->failed;
            return pl_errprintf(errp, "%s", db->why);
        }
        /* SQLite rolled back what the failed commit held: do it again.
         * A checkpoint first: if it copies the whole WAL into the
         * database, the retry writes the WAL from its start, over space
         * it already has (it fails if the database must grow) */
        sqlite3_wal_checkpoint_v2(db->h, NULL, SQLITE_CHECKPOINT_PASSIVE,
                                  NULL, NULL);
        if (db_begin(db, errp) < 0)
            goto error;
        for (struct jent *j = db->jhead; j; j = j->next) {
            /* a task whose submission was undone with the failed commit
             * has nothing to change */
            if (apply(db, j, true, errp) < 0 && errno != ENOENT
                && errno != EINVAL)
                goto error;
        }
        /* and one write of its own, so that the retry of an empty
         * journal (the failed batch held only submissions) proves the
         * directory writable too: when the last failure ended, and why */
        char buf[sizeof(db->why) + 64];
        struct jent rec = { .kind = J_META };
        snprintf(buf, sizeof(buf), "%.0f %.0f %s", db->failed_at,
                 (double)time(NULL), db->why);
        rec.s[0] = "store_failure";
        rec.s[1] = buf;
        if (apply(db, &rec, true, errp) < 0)
            goto error;
    }
    if (!db->in_txn)
        return 0;
    if (db_flush(db, errp) < 0 || db_step(db, ST_COMMIT, errp) < 0)
        goto error;
    db->in_txn = 0;
    db->failed = 0;
    db->why[0] = '\0';
    journal_clear(db);
    return 0;
error:
    if (db->in_txn)
        db_txn_lost(db, errp);
    else
        set_failed(db, errp); /* BEGIN failed, or SQLite rolled back */
    return -1;
}

int pl_db_checkpoint(struct pl_db *db, struct pl_error *errp)
{
    int log = 0, done = 0;

    if (db->in_txn)
        return 0;
    if (sqlite3_wal_checkpoint_v2(db->h, NULL, SQLITE_CHECKPOINT_PASSIVE,
                                  &log, &done) != SQLITE_OK)
        return db_err(db, errp, "checkpoint");
    return 0;
}

int pl_db_sync(struct pl_db *db, struct pl_error *errp)
{
    sqlite3_file *wal = NULL;
    int rc;

    /* in WAL mode the journal pointer is the WAL file (pager.c,
     * sqlite3PagerJrnlFile); its xSync is what synchronous=FULL does at
     * each commit, here only for the commits someone waits on */
    if (sqlite3_file_control(db->h, "main", SQLITE_FCNTL_JOURNAL_POINTER,
                             &wal) != SQLITE_OK || !wal || !wal->pMethods)
        return 0; /* no WAL open: nothing written since it was reset */
    if ((rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL)) != SQLITE_OK) {
        errno = EIO;
        return pl_errprintf(errp, "sync of the WAL in %s: %s", db->dir,
                            sqlite3_errstr(rc));
    }
    return 0;
}

/* The text a write refused while the commit has failed gets. */
int db_refuse(struct pl_db *db, struct pl_error *errp)
{
    errno = db->failed;
    return pl_errprintf(errp, "%s", db->why);
}

int pl_db_savepoint(struct pl_db *db, struct pl_error *errp)
{
    if (db->failed)
        return db_refuse(db, errp);
    /* N.B. what is pending is written outside the savepoint: a rollback
     * to it drops what was made inside only */
    if (db_begin(db, errp) < 0 || db_flush(db, errp) < 0
        || db_step(db, ST_SAVE, errp) < 0)
        return -1;
    db->mark = db->jtail;
    return 0;
}

int pl_db_savepoint_end(struct pl_db *db, bool keep, struct pl_error *errp)
{
    struct jent **mark = db->mark;

    if (!db->in_txn) {
        errno = db->failed ? db->failed : EINVAL;
        return pl_errprintf(errp, "no savepoint: %s",
                            db->failed ? db->why : "no transaction");
    }
    db->mark = NULL;
    if (!keep) {
        if (db_step(db, ST_ROLLBACK_TO, errp) < 0)
            return -1;
        /* the journal forgets what the savepoint held */
        if (mark) {
            for (struct jent *j = *mark; j; j = j->next)
                if (j->kind != J_FIRST)
                    db->jlen--;
            journal_free(*mark);
            *mark = NULL;
            db->jtail = mark;
            /* db_flush() left nothing pending before the mark */
            db->pend = mark;
            db->npend = 0;
        }
    }
    return db_step(db, ST_RELEASE, errp);
}

void pl_db_rollback(struct pl_db *db)
{
    /* N.B. after some errors (SQLITE_FULL) SQLite has already rolled back */
    if (db->in_txn && !sqlite3_get_autocommit(db->h))
        db_step(db, ST_ROLLBACK, NULL);
    db->in_txn = 0;
    db->failed = 0;
    db->why[0] = '\0';
    journal_clear(db);
}

int pl_db_task_change(struct pl_db *db, const struct pl_db_change *c,
                      struct pl_error *errp)
{
    struct jent *j = jent_change(J_CHANGE, c);

    if (!j) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    return db_write_j(db, j, errp);
}

int pl_db_rank_event(struct pl_db *db, const struct pl_db_change *c,
                     uint32_t rank, struct pl_error *errp)
{
    struct jent *j = jent_change(J_RANK, c);

    if (!j) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    j->rank = rank;
    return db_write_j(db, j, errp);
}
