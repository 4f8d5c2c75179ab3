/* daemon/db_batch.c - SQLite state: the task changes and events of a
 * batch, written together before its commit
 *
 * A state change of a task (J_CHANGE), a rank's event (J_RANK) and a
 * submission's first event (J_FIRST) are not written when they are made
 * but kept pending in the journal, and written by db_flush(): before the
 * commit, before a savepoint, and before anything reads the tasks or
 * the events (so a read inside the transaction sees them, as before).
 * There, the changes of one task are merged into one UPDATE (its
 * running and its done, which come in one EVENTS message from a fast
 * task, or its assigned too), and the events go in multi-row INSERTs of
 * up to EV_ROWS rows: 2 statements a batch and one a task, where each
 * change was an UPDATE and an INSERT (6 statements a task, three
 * quarters of pilotd's CPU in docs/PERFORMANCE.md's scenario 2).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/db.h"
#include "daemon/db_private.h"
#include "proto/log.h"
#include "proto/state.h"

/* One task's changes of a batch, merged: the UPDATE that leaves its row
 * as the changes one after the other would. */
struct upd {
    struct pl_db_change c;   /* state, reason, end_seq: the last's;
                                attempt: the largest; the others: the
                                last that had one */
    struct pl_usage use;     /* per figure, the last measured */
    int start_mode;          /* the last change's that touched start_time
                                (start_mode(): 1 set, 2 clear) */
    double start_time;       /* ... and its time */
    bool missing;            /* no row: its events are not written */
};

/* Whether a change to 'state' touches start_time: running sets it,
 * queued and assigned clear it (an earlier attempt's), others keep it
 * (1, 2, 0). */
static int start_mode(int state)
{
    if (state == PL_ST_RUNNING)
        return 1;
    return state == PL_ST_QUEUED || state == PL_ST_ASSIGNED ? 2 : 0;
}

/* The columns an UPDATE of a task sets besides state, attempts, reason
 * and end_time (always): one statement for each set of them, prepared
 * when first needed.  N.B. one UPDATE with coalesce() for every column
 * cost 3 us more a change than one with the columns that change; and
 * an IN list (start_time's states) made SQLite open an ephemeral table
 * for every change, a tenth of pilotd's CPU (docs/PERFORMANCE.md). */
enum {
    U_NODE = 1 << 0, U_CORES = 1 << 1, U_GPUS = 1 << 2, U_EXIT = 1 << 3,
    U_SIGNAL = 1 << 4, U_RSS = 1 << 5, U_START = 1 << 6, U_CLEAR = 1 << 7,
    U_SEQ = 1 << 8, U_CPU = 1 << 9, U_GUTIL = 1 << 10, U_GMEM = 1 << 11,
    U_GPOWER = 1 << 12,
};

/* Each column: its bit and what it sets (the parameters are numbered as
 * in struct upd's binds below). */
static const struct {
    unsigned bit;
    const char *set;
} ucols[] = {
    { U_NODE, "node = ?4" },
    { U_CORES, "cores = ?5" },
    { U_GPUS, "gpus = ?6" },
    { U_EXIT, "exit_code = ?8" },
    { U_SIGNAL, "signal = ?9" },
    { U_RSS, "maxrss_kb = ?10" },
    { U_START, "start_time = ?11" },
    { U_CLEAR, "start_time = NULL" },
    { U_SEQ, "end_seq = ?14" },
    { U_CPU, "cpu_user = ?15, cpu_sys = ?16" },
    { U_GUTIL, "gpu_util = ?17" },
    { U_GMEM, "gpu_mem_mb = ?18" },
    { U_GPOWER, "gpu_power_w = ?19" },
};

/* The UPDATE that sets the columns 'mask', or NULL (errp). */
static sqlite3_stmt *update_stmt(struct pl_db *db, unsigned mask,
                                 struct pl_error *errp)
{
    char sql[1024];
    size_t len;

    if (!db->updst && !(db->updst = calloc(U_COMBOS, sizeof(*db->updst)))) {
        errno = ENOMEM;
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    if (db->updst[mask])
        return db->updst[mask];
    len = (size_t)snprintf(sql, sizeof(sql), "UPDATE tasks SET state = ?2, "
                           "attempts = max(attempts, ?3), reason = ?7, "
                           "end_time = ?13");
    for (size_t i = 0; i < sizeof(ucols) / sizeof(ucols[0]); i++)
        if (mask & ucols[i].bit)
            len += (size_t)snprintf(sql + len, sizeof(sql) - len, ", %s",
                                    ucols[i].set);
    len += (size_t)snprintf(sql + len, sizeof(sql) - len, " WHERE id = ?1");
    if (sqlite3_prepare_v3(db->h, sql, (int)len, SQLITE_PREPARE_PERSISTENT,
                           &db->updst[mask], NULL) != SQLITE_OK) {
        db_err(db, errp, "prepare a change of a task");
        return NULL;
    }
    return db->updst[mask];
}

/* Bind 's' (NULL: NULL) without a copy: it lives in the journal until
 * the statement has run. */
static void bind_static(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

/* Run the UPDATE of 'u': what is NULL or negative in it is left as the
 * row has it ('reason' and 'end_time' are always written).  1: done,
 * 0: the task has no row, -1: error (errp). */
static int update(struct pl_db *db, const struct upd *u,
                  struct pl_error *errp)
{
    const struct pl_db_change *c = &u->c;
    const struct pl_usage *v = &u->use;
    unsigned mask = (c->node ? U_NODE : 0) | (c->cores ? U_CORES : 0)
                    | (c->gpus ? U_GPUS : 0)
                    | (c->exit_code >= 0 ? U_EXIT : 0)
                    | (c->signal >= 0 ? U_SIGNAL : 0)
                    | (c->maxrss_kb >= 0 ? U_RSS : 0)
                    | (u->start_mode == 1 ? U_START : 0)
                    | (u->start_mode == 2 ? U_CLEAR : 0)
                    | (c->end_seq ? U_SEQ : 0)
                    | (v->has & PL_USE_CPU ? U_CPU : 0)
                    | (v->has & PL_USE_GPU_UTIL ? U_GUTIL : 0)
                    | (v->has & PL_USE_GPU_MEM ? U_GMEM : 0)
                    | (v->has & PL_USE_GPU_POWER ? U_GPOWER : 0);
    sqlite3_stmt *st = update_stmt(db, mask, errp);
    int rc;

    if (!st)
        return -1;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)c->id);
    sqlite3_bind_text(st, 2, pl_state_name(c->state), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, c->attempt);
    bind_static(st, 7, c->reason);
    if (pl_state_final(c->state))
        sqlite3_bind_double(st, 13, c->time);
    else
        sqlite3_bind_null(st, 13);
    if (mask & U_NODE)
        sqlite3_bind_text(st, 4, c->node, -1, SQLITE_STATIC);
    if (mask & U_CORES)
        sqlite3_bind_text(st, 5, c->cores, -1, SQLITE_STATIC);
    if (mask & U_GPUS)
        sqlite3_bind_text(st, 6, c->gpus, -1, SQLITE_STATIC);
    if (mask & U_EXIT)
        sqlite3_bind_int(st, 8, c->exit_code);
    if (mask & U_SIGNAL)
        sqlite3_bind_int(st, 9, c->signal);
    if (mask & U_RSS)
        sqlite3_bind_int64(st, 10, c->maxrss_kb);
    if (mask & U_START)
        sqlite3_bind_double(st, 11, u->start_time);
    if (mask & U_SEQ)
        sqlite3_bind_int64(st, 14, (sqlite3_int64)c->end_seq);
    if (mask & U_CPU) {
        sqlite3_bind_double(st, 15, v->cpu_user);
        sqlite3_bind_double(st, 16, v->cpu_sys);
    }
    if (mask & U_GUTIL)
        sqlite3_bind_double(st, 17, v->gpu_util);
    if (mask & U_GMEM)
        sqlite3_bind_int64(st, 18, (sqlite3_int64)(v->gpu_mem_mb + 0.5));
    if (mask & U_GPOWER)
        sqlite3_bind_double(st, 19, v->gpu_power_w);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return db_err(db, errp, "change a task");
    return sqlite3_changes(db->h) > 0;
}

/* 'u' as change 'c' alone. */
static void upd_init(struct upd *u, const struct pl_db_change *c)
{
    memset(u, 0, sizeof(*u));
    u->c = *c;
    u->c.use = NULL;
    if (c->use)
        u->use = *c->use;
    u->start_mode = start_mode(c->state);
    u->start_time = c->time;
}

/* Change 'c', made after those 'u' holds, merged into it. */
static void upd_merge(struct upd *u, const struct pl_db_change *c)
{
    struct pl_db_change *m = &u->c;
    int mode = start_mode(c->state);

    m->state = c->state;
    m->time = c->time;
    if (c->attempt > m->attempt)
        m->attempt = c->attempt;
    if (c->node)
        m->node = c->node;
    if (c->cores)
        m->cores = c->cores;
    if (c->gpus)
        m->gpus = c->gpus;
    m->reason = c->reason;
    if (c->exit_code >= 0)
        m->exit_code = c->exit_code;
    if (c->signal >= 0)
        m->signal = c->signal;
    if (c->maxrss_kb >= 0)
        m->maxrss_kb = c->maxrss_kb;
    if (c->end_seq)
        m->end_seq = c->end_seq;
    if (mode) {
        u->start_mode = mode;
        u->start_time = c->time;
    }
    if (c->use) {
        const struct pl_usage *v = c->use;
        if (v->has & PL_USE_CPU) {
            u->use.cpu_user = v->cpu_user;
            u->use.cpu_sys = v->cpu_sys;
        }
        if (v->has & PL_USE_GPU_UTIL)
            u->use.gpu_util = v->gpu_util;
        if (v->has & PL_USE_GPU_MEM)
            u->use.gpu_mem_mb = v->gpu_mem_mb;
        if (v->has & PL_USE_GPU_POWER)
            u->use.gpu_power_w = v->gpu_power_w;
        u->use.has |= v->has;
    }
}

int db_change_one(struct pl_db *db, const struct pl_db_change *c,
                  struct pl_error *errp)
{
    struct upd u;
    int rc;

    upd_init(&u, c);
    if ((rc = update(db, &u, errp)) < 0)
        return -1;
    if (rc == 0) {
        errno = ENOENT;
        return pl_errprintf(errp, "no task %llu", (unsigned long long)c->id);
    }
    return db_event(db, ST_EVENT, c->id, c->time, c->state, c->attempt,
                    c->node, c->cores, c->gpus, c->reason, -1, errp);
}

/* The multi-row insert of 'rows' events, prepared when first needed. */
static sqlite3_stmt *events_stmt(struct pl_db *db, int rows,
                                 struct pl_error *errp)
{
    char *sql;
    size_t len = 0, cap = 128 + (size_t)rows * 64;

    if (db->evst[rows])
        return db->evst[rows];
    if (!(sql = malloc(cap))) {
        errno = ENOMEM;
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    /* OR FAIL: a statement of many rows that may abort has SQLite
     * journal the pages it changes, for each statement (a temp file past
     * 64 KiB); none can fail for a constraint here, and an error loses
     * the whole transaction anyway (db_txn_lost()) */
    len += (size_t)snprintf(sql, cap, "INSERT OR FAIL INTO events (task, "
                            "time, state, attempt, node, cores, gpus, "
                            "detail, rank) VALUES ");
    for (int r = 0; r < rows; r++)
        len += (size_t)snprintf(sql + len, cap - len,
                                "%s(?,?,?,?,?,?,?,?,?)", r ? "," : "");
    if (sqlite3_prepare_v3(db->h, sql, (int)len, SQLITE_PREPARE_PERSISTENT,
                           &db->evst[rows], NULL) != SQLITE_OK) {
        free(sql);
        db_err(db, errp, "prepare an insert of events");
        return NULL;
    }
    free(sql);
    return db->evst[rows];
}

/* Insert the events of the 'n' entries 'v' (n <= EV_ROWS) in one
 * statement. */
static int events_insert(struct pl_db *db, struct jent *const *v, int n,
                         struct pl_error *errp)
{
    sqlite3_stmt *st = events_stmt(db, n, errp);
    int rc;

    if (!st)
        return -1;
    for (int r = 0; r < n; r++) {
        const struct jent *j = v[r];
        const struct pl_db_change *c = &j->c;
        int p = r * 9;
        sqlite3_bind_int64(st, p + 1, (sqlite3_int64)c->id);
        sqlite3_bind_double(st, p + 2, c->time);
        sqlite3_bind_text(st, p + 3, pl_state_name(c->state), -1,
                          SQLITE_STATIC);
        sqlite3_bind_int64(st, p + 4, c->attempt);
        bind_static(st, p + 5, c->node);
        bind_static(st, p + 6, c->cores);
        bind_static(st, p + 7, c->gpus);
        bind_static(st, p + 8, c->reason);
        if (j->kind == J_RANK)
            sqlite3_bind_int64(st, p + 9, j->rank);
        else
            sqlite3_bind_null(st, p + 9);
    }
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE)
        return db_err(db, errp, "insert events");
    return 0;
}

/* The slot of task 'id' in the open-addressing table 'tab' ('mask' + 1
 * slots, 0: empty, else an index into the updates + 1). */
static uint32_t *slot_of(uint32_t *tab, size_t mask, const struct upd *u,
                         uint64_t id)
{
    size_t h = (size_t)(id * 0x9e3779b97f4a7c15ULL >> 32) & mask;

    while (tab[h] && u[tab[h] - 1].c.id != id)
        h = (h + 1) & mask;
    return &tab[h];
}

/* Grow the flush's scratch arrays for 'n' pending entries. */
static int scratch(struct pl_db *db, size_t n)
{
    size_t tabn = 16;

    while (tabn < 2 * n)
        tabn *= 2;
    if (n > db->capv) {
        struct jent **v = realloc(db->v, n * sizeof(*v));
        struct upd *u = v ? realloc(db->upd, n * sizeof(*u)) : NULL;
        uint32_t *ix = u ? realloc(db->ix, n * sizeof(*ix)) : NULL;
        if (v)
            db->v = v;
        if (u)
            db->upd = u;
        if (!ix)
            return -1;
        db->ix = ix;
        db->capv = n;
    }
    if (tabn > db->captab) {
        uint32_t *t = realloc(db->tab, tabn * sizeof(*t));
        if (!t)
            return -1;
        db->tab = t;
        db->captab = tabn;
    }
    memset(db->tab, 0, tabn * sizeof(*db->tab));
    db->tabmask = tabn - 1;
    return 0;
}

int db_flush(struct pl_db *db, struct pl_error *errp)
{
    struct pl_error local = { "" };
    size_t n = 0, nu = 0;

    if (db->npend == 0)
        return 0;
    if (!errp)
        errp = &local; /* the reason is kept for pl_db_failed() */
    if (scratch(db, db->npend) < 0) {
        errno = ENOMEM;
        pl_errprintf(errp, "out of memory");
        goto error;
    }
    for (struct jent *j = *db->pend; j; j = j->next) {
        if (!j->pending)
            continue;
        j->pending = false;
        db->v[n] = j;
        db->ix[n] = UINT32_MAX;
        if (j->kind == J_CHANGE) {
            uint32_t *s = slot_of(db->tab, db->tabmask, db->upd, j->c.id);
            if (*s)
                upd_merge(&db->upd[*s - 1], &j->c);
            else {
                upd_init(&db->upd[nu], &j->c);
                *s = (uint32_t)++nu;
            }
            db->ix[n] = *s - 1;
        }
        n++;
    }
    db->pend = db->jtail;
    db->npend = 0;
    for (size_t i = 0; i < nu; i++) {
        int rc = update(db, &db->upd[i], errp);
        if (rc < 0)
            goto error;
        if (rc == 0) {
            /* cannot be: a live task's row was inserted first (and a
             * savepoint rolled back takes its changes with it) */
            db->upd[i].missing = true;
            pl_log(LOG_ERR, "database: a change of task %llu, which has "
                   "no row: dropped",
                   (unsigned long long)db->upd[i].c.id);
        }
    }
    /* the events, in the order they were made (their ids keep it) */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (db->ix[i] == UINT32_MAX || !db->upd[db->ix[i]].missing)
            db->v[k++] = db->v[i];
    for (size_t i = 0; i < k; i += EV_ROWS) {
        int rows = k - i < EV_ROWS ? (int)(k - i) : EV_ROWS;
        if (events_insert(db, db->v + i, rows, errp) < 0)
            goto error;
    }
    return 0;
error:
    /* the journal holds every write: the retry does them again */
    db_txn_lost(db, errp);
    return -1;
}

void db_batch_free(struct pl_db *db)
{
    for (int i = 0; i <= EV_ROWS; i++)
        sqlite3_finalize(db->evst[i]);
    for (int i = 0; db->updst && i < U_COMBOS; i++)
        sqlite3_finalize(db->updst[i]);
    free(db->updst);
    free(db->v);
    free(db->upd);
    free(db->ix);
    free(db->tab);
}
