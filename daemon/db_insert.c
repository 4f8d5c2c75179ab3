/* daemon/db_insert.c - SQLite state: the insert of tasks, up to INS_ROWS
 * rows a statement, with their lists written as JSON text directly
 *
 * The elements of an array (and the tasks of one request) go in
 * multi-row INSERTs of up to INS_ROWS rows, one statement prepared for
 * each row count: one statement to step for 64 tasks, where each task
 * was one (the insert was 61% of pilotd's CPU queueing arrays,
 * docs/PERFORMANCE.md, issue 16).  argv and env are written as JSON
 * here, not through jansson's objects, and written once for rows that
 * share them (an array's env, a stream of one command).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "daemon/db.h"
#include "daemon/db_private.h"
#include "proto/state.h"
#include "proto/strv.h"

/* The columns of a task's insert, in the order they are bound.  OR
 * FAIL: a statement of many rows that may abort has SQLite journal the
 * pages it changes for each statement (a temp file past 64 KiB: 3 in 4
 * of pilotd's writes queueing an array); none can fail for a constraint
 * here, and the caller's savepoint undoes a failed request whole. */
#define INS_COLS 26
#define INS_SQL                                                              \
    "INSERT OR FAIL INTO tasks (name, argv, env, cwd, ranks, "              \
    "cores_per_rank, gpus_per_rank, timeout, retries, state, submit_time, "  \
    "nodes, "                                                                \
    "ranks_per_node, exclusive, comm, launcher, after, array_id, "           \
    "array_index, priority, tags, submitted_by, output_limit, pool, fn, "    \
    "vetted) VALUES "

/* ------------------------------------------------------------ JSON text */

/* Room for 'more' bytes in db->jb.  0, or -1 (ENOMEM). */
static int jb_room(struct pl_db *db, size_t more)
{
    return pl_grow(&db->jb, &db->jbcap, db->jblen, more, 1);
}

/* Append 'v' as a JSON array of strings (as jansson's compact dump
 * writes it: '"', '\\' and the control characters escaped, the rest as
 * it is) and its NUL to db->jb.  Its offset, or -1 (ENOMEM, or EINVAL:
 * a string that is not UTF-8, which JSON cannot hold). */
static long jb_strv(struct pl_db *db, char *const *v)
{
    static const char hex[] = "0123456789abcdef";
    size_t at = db->jblen;

    if (jb_room(db, 2) < 0)
        return -1;
    db->jb[db->jblen++] = '[';
    for (size_t i = 0; v && v[i]; i++) {
        size_t len = strlen(v[i]);
        if (!pl_utf8_valid(v[i], len)) {
            db->jblen = at;
            errno = EINVAL;
            return -1;
        }
        /* each byte 6 at most (\u001f), its quotes, a comma */
        if (len > (SIZE_MAX - 8) / 6 || jb_room(db, len * 6 + 4) < 0) {
            db->jblen = at;
            errno = ENOMEM;
            return -1;
        }
        char *o = db->jb + db->jblen;
        if (i)
            *o++ = ',';
        *o++ = '"';
        for (const unsigned char *p = (const unsigned char *)v[i]; *p; p++) {
            unsigned char c = *p;
            if (c >= 0x20 && c != '"' && c != '\\') {
                *o++ = (char)c;
                continue;
            }
            *o++ = '\\';
            switch (c) {
            case '"': *o++ = '"'; break;
            case '\\': *o++ = '\\'; break;
            case '\b': *o++ = 'b'; break;
            case '\f': *o++ = 'f'; break;
            case '\n': *o++ = 'n'; break;
            case '\r': *o++ = 'r'; break;
            case '\t': *o++ = 't'; break;
            default:
                *o++ = 'u';
                *o++ = '0';
                *o++ = '0';
                *o++ = hex[c >> 4];
                *o++ = hex[c & 15];
            }
        }
        *o++ = '"';
        db->jblen = (size_t)(o - db->jb);
    }
    if (jb_room(db, 2) < 0) {
        db->jblen = at;
        return -1;
    }
    db->jb[db->jblen++] = ']';
    db->jb[db->jblen++] = '\0';
    return (long)at;
}

/* Append 's' (malloc()'d, taken; NULL: ENOMEM) to db->jb.  Its offset,
 * or -1 (ENOMEM). */
static long jb_take(struct pl_db *db, char *s)
{
    size_t at = db->jblen, len;

    if (!s) {
        errno = ENOMEM;
        return -1;
    }
    len = strlen(s) + 1;
    if (jb_room(db, len) < 0) {
        free(s);
        return -1;
    }
    memcpy(db->jb + at, s, len);
    db->jblen += len;
    free(s);
    return (long)at;
}

/* Tags "KEY=VALUE" as a JSON object's text, or NULL (ENOMEM). */
static char *json_tags(char *const *tags)
{
    json_t *o = json_object();
    char *s = NULL;

    for (size_t i = 0; o && tags[i]; i++) {
        const char *eq = strchr(tags[i], '=');
        char key[PL_SPEC_MAX_TAG_KEY + 8];
        snprintf(key, sizeof(key), "%.*s", (int)(eq - tags[i]), tags[i]);
        if (json_object_set_new(o, key, json_string(eq + 1)) < 0)
            goto done;
    }
    s = o ? json_dumps(o, JSON_COMPACT) : NULL;
done:
    json_decref(o);
    return s;
}

/* The 'after' column: [[id, any]...], [id, any, 1] for one element. */
static char *json_after(const struct pl_db_dep *v, uint32_t n)
{
    size_t cap = (size_t)n * 30 + 3, len = 0;
    char *s = malloc(cap);

    if (!s)
        return NULL;
    s[len++] = '[';
    for (uint32_t i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s[%llu,%d%s]",
                                i ? "," : "", (unsigned long long)v[i].id,
                                v[i].any ? 1 : 0, v[i].one ? ",1" : "");
    s[len++] = ']';
    s[len] = '\0';
    return s;
}

/* ------------------------------------------------------------ inserts */

/* The insert of 'rows' tasks, prepared when first needed. */
static sqlite3_stmt *insert_stmt(struct pl_db *db, int rows,
                                 struct pl_error *errp)
{
    static const char one[] = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                              "?,?,?,?,?)";
    size_t cap = sizeof(INS_SQL) + (size_t)rows * sizeof(one), len;
    char *sql;

    if (db->insst[rows])
        return db->insst[rows];
    if (!(sql = malloc(cap))) {
        errno = ENOMEM;
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    len = (size_t)snprintf(sql, cap, "%s", INS_SQL);
    for (int r = 0; r < rows; r++)
        len += (size_t)snprintf(sql + len, cap - len, "%s%s", r ? "," : "",
                                one);
    if (sqlite3_prepare_v3(db->h, sql, (int)len, SQLITE_PREPARE_PERSISTENT,
                           &db->insst[rows], NULL) != SQLITE_OK) {
        free(sql);
        db_err(db, errp, "prepare an insert of tasks");
        return NULL;
    }
    free(sql);
    return db->insst[rows];
}

/* Offsets into db->jb of one row's texts (-1: NULL). */
struct itext {
    long argv, env, tags, after;
};

/* Whether tasks 'a' and 'b' have the same argv (its strings). */
static bool same_strv(char *const *a, char *const *b)
{
    if (a == b)
        return true;
    if (!a || !b)
        return false;
    size_t i = 0;
    while (a[i] && b[i] && !strcmp(a[i], b[i]))
        i++;
    return !a[i] && !b[i];
}

static char *const *argv_of(const struct pl_db_task *t)
{
    return t->argv ? t->argv : t->spec->argv;
}

/* The texts of rows 't' ('n') into x[].  0, or -1 (errp). */
static int texts(struct pl_db *db, const struct pl_db_task *t, int n,
                 struct itext *x, struct pl_error *errp)
{
    db->jblen = 0;
    for (int r = 0; r < n; r++) {
        const struct pl_spec *s = t[r].spec;
        const struct pl_db_task *p = r ? &t[r - 1] : NULL;
        x[r] = (struct itext){ -1, -1, -1, -1 };
        /* N.B. no argv binds NULL: the NOT NULL constraint refuses it */
        if (p && same_strv(argv_of(p), argv_of(&t[r])))
            x[r].argv = x[r - 1].argv;
        else if (argv_of(&t[r])
                 && (x[r].argv = jb_strv(db, argv_of(&t[r]))) < 0)
            goto error;
        if (p && same_strv(p->spec->env, s->env))
            x[r].env = x[r - 1].env;
        else if (s->env && (x[r].env = jb_strv(db, s->env)) < 0)
            goto error;
        if (p && p->spec == s)
            x[r].tags = x[r - 1].tags;
        else if (s->tags && (x[r].tags = jb_take(db, json_tags(s->tags))) < 0)
            goto error;
        if (p && p->after == t[r].after && p->nafter == t[r].nafter)
            x[r].after = x[r - 1].after;
        else if (t[r].nafter
                 && (x[r].after = jb_take(db, json_after(t[r].after,
                                                         t[r].nafter))) < 0)
            goto error;
    }
    return 0;
error:
    if (errno == EINVAL)
        return pl_errprintf(errp, "a command or environment that is not "
                            "UTF-8");
    errno = ENOMEM;
    return pl_errprintf(errp, "out of memory");
}

static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

static void bind_off(struct pl_db *db, sqlite3_stmt *st, int i, long off)
{
    bind_text(st, i, off >= 0 ? db->jb + off : NULL);
}

/* Bind row 't' at parameters p+1.. of 'st'. */
static void bind_row(struct pl_db *db, sqlite3_stmt *st, int p,
                     const struct pl_db_task *t, const struct itext *x,
                     int state, double now)
{
    const struct pl_spec *s = t->spec;

    bind_text(st, p + 1, t->name ? t->name : s->name);
    bind_off(db, st, p + 2, x->argv);
    bind_off(db, st, p + 3, x->env);
    bind_text(st, p + 4, s->cwd);
    sqlite3_bind_int64(st, p + 5, (sqlite3_int64)s->ranks);
    sqlite3_bind_int64(st, p + 6, (sqlite3_int64)s->cpr);
    sqlite3_bind_int64(st, p + 7, (sqlite3_int64)s->gpr);
    if (s->timeout > 0)
        sqlite3_bind_double(st, p + 8, s->timeout);
    else
        sqlite3_bind_null(st, p + 8);
    sqlite3_bind_int64(st, p + 9, (sqlite3_int64)s->retries);
    sqlite3_bind_text(st, p + 10, pl_state_name(state), -1, SQLITE_STATIC);
    sqlite3_bind_double(st, p + 11, now);
    sqlite3_bind_int64(st, p + 12, (sqlite3_int64)s->nodes);
    sqlite3_bind_int64(st, p + 13, (sqlite3_int64)s->rpn);
    sqlite3_bind_int(st, p + 14, s->exclusive);
    sqlite3_bind_text(st, p + 15, pl_comm_name(s->comm), -1, SQLITE_STATIC);
    if (s->launcher != PL_LAUNCHER_UNSET)
        sqlite3_bind_text(st, p + 16, pl_launcher_name(s->launcher), -1,
                          SQLITE_STATIC);
    else
        sqlite3_bind_null(st, p + 16);
    bind_off(db, st, p + 17, x->after);
    if (t->array_id) {
        sqlite3_bind_int64(st, p + 18, (sqlite3_int64)t->array_id);
        sqlite3_bind_int64(st, p + 19, (sqlite3_int64)t->array_index);
    }
    else {
        sqlite3_bind_null(st, p + 18);
        sqlite3_bind_null(st, p + 19);
    }
    sqlite3_bind_int64(st, p + 20, s->priority);
    bind_off(db, st, p + 21, x->tags);
    bind_text(st, p + 22, t->submitted_by);
    if (s->output_limit)
        sqlite3_bind_int64(st, p + 23, (sqlite3_int64)s->output_limit);
    else
        sqlite3_bind_null(st, p + 23);
    bind_text(st, p + 24, s->pool);
    if (s->fn != PL_FN_NONE)
        sqlite3_bind_text(st, p + 25, pl_fn_name(s->fn), -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, p + 25);
    if (s->vetted)
        sqlite3_bind_int64(st, p + 26, (sqlite3_int64)s->vetted);
    else
        sqlite3_bind_null(st, p + 26);
}

/* Insert rows 't' ('n' <= INS_ROWS) in one statement, their ids into
 * ids[]. */
static int insert_some(struct pl_db *db, const struct pl_db_task *t, int n,
                       int state, double now, uint64_t *ids,
                       struct pl_error *errp)
{
    struct itext x[INS_ROWS];
    sqlite3_stmt *st;
    int rc;

    if (texts(db, t, n, x, errp) < 0 || !(st = insert_stmt(db, n, errp)))
        return -1;
    for (int r = 0; r < n; r++)
        bind_row(db, st, r * INS_COLS, &t[r], &x[r], state, now);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return db_err(db, errp, "insert a task");
    if (sqlite3_changes(db->h) != n) { /* cannot be: no trigger, no OR */
        errno = EIO;
        return pl_errprintf(errp, "database: insert a task: %d rows of %d",
                            sqlite3_changes(db->h), n);
    }
    /* the rows of one statement take consecutive ids (AUTOINCREMENT: the
     * largest so far plus one, row after row; pilotd the only writer) */
    uint64_t last = (uint64_t)sqlite3_last_insert_rowid(db->h);
    for (int r = 0; r < n; r++)
        ids[r] = last - (uint64_t)(n - 1 - r);
    return 0;
}

int pl_db_task_insert_n(struct pl_db *db, const struct pl_db_task *t,
                        size_t n, int state, double now, uint64_t *ids,
                        struct pl_error *errp)
{
    if (db->failed)
        return db_refuse(db, errp);
    if (db_begin(db, errp) < 0)
        return -1;
    for (size_t i = 0; i < n; i += INS_ROWS) {
        int rows = n - i < INS_ROWS ? (int)(n - i) : INS_ROWS;
        if (insert_some(db, t + i, rows, state, now, ids + i, errp) < 0)
            return -1;
    }
    /* schema 13: a queued task's first event is its submit_time (the
     * readers make it); a waiting one's is written, in the batch's
     * insert of events */
    for (size_t i = 0; state != PL_ST_QUEUED && i < n; i++) {
        struct jent *j = jent_new(J_FIRST, NULL, 0);
        if (!j) {
            errno = ENOMEM;
            return pl_errprintf(errp, "out of memory");
        }
        j->c = (struct pl_db_change){ .id = ids[i], .state = state,
                                      .time = now, .exit_code = -1,
                                      .signal = -1, .maxrss_kb = -1 };
        if (db_write_j(db, j, errp) < 0)
            return -1;
    }
    return 0;
}

int pl_db_task_insert(struct pl_db *db, const struct pl_db_task *t,
                      int state, double now, uint64_t *id,
                      struct pl_error *errp)
{
    return pl_db_task_insert_n(db, t, 1, state, now, id, errp);
}

void db_insert_free(struct pl_db *db)
{
    for (int i = 0; i <= INS_ROWS; i++)
        sqlite3_finalize(db->insst[i]);
    free(db->jb);
}
