/* daemon/db_private.h - what the files of daemon/db share (db.c,
 * db_task.c, db_meta.c, db_batch.c, db_insert.c, db_py.c) */
#ifndef PL_DAEMON_DB_PRIVATE_H
#define PL_DAEMON_DB_PRIVATE_H

#include <sqlite3.h>

#include "daemon/db.h"

/* The prepared statements (db.c's sql[]). */
enum {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_EVENT,
    ST_NODE,
    ST_META,
    ST_STATE,
    ST_SAVE,
    ST_RELEASE,
    ST_ROLLBACK_TO,
    ST_EVENT_IF,
    ST_BY_NAME,
    ST_ARRAY,
    ST_MEMBERS,
    ST_PYIN_ADD,
    ST_PYIN_GET,
    ST_RESULT,
    ST_ENDS,
    ST_REF_GET,
    ST_TASK_FN,
    ST_NODE_VET,
    ST_COUNT
};

/* One write since the last commit (not the insert of a submission),
 * kept to be done again when the commit fails.  J_FIRST: a submission's
 * first event, written with the others of the batch (db_batch.c) but,
 * as the insert of its task, not done again: a failed commit drops it
 * (db_txn_lost()). */
enum jkind { J_CHANGE = 1, J_RANK, J_NODE, J_META, J_RESULT, J_NODE_VET,
             J_FIRST };

/* Rows of one multi-row INSERT of events (9 parameters each). */
#define EV_ROWS 64
/* Rows of one multi-row INSERT of tasks (26 parameters each). */
#define INS_ROWS 64
/* The sets of columns an UPDATE of a task may set (db_batch.c). */
#define U_COMBOS (1 << 13)

struct upd;

struct jent {
    struct jent *next;
    enum jkind kind;
    bool pending;            /* J_CHANGE, J_RANK, J_FIRST: not written
                                yet (db_flush()) */
    struct pl_db_change c;   /* J_CHANGE, J_RANK: strings point into buf,
                                'use' to 'use' */
    struct pl_usage use;     /* J_CHANGE: a copy of *c.use */
    uint32_t rank;           /* J_RANK */
    double joined;           /* J_NODE: the first time it was written */
    const char *s[4];        /* J_NODE: name, cores, gpus, state;
                                J_META: key, value (NULL or into buf);
                                J_RESULT: file, repr;
                                J_NODE_VET: name, cordon, vet (its
                                time in c.time, 0: NULL) */
    const unsigned char *blob; /* J_RESULT: the pickle inline (into buf),
                                'nblob' bytes, or NULL */
    size_t nblob;
    int status;              /* J_RESULT: enum pl_pyr */
    int64_t size;            /* J_RESULT: bytes of the pickle */
    char buf[];
};

struct pl_db {
    sqlite3 *h;
    sqlite3_stmt *st[ST_COUNT];
    int in_txn;
    /* The journal: every write since the last commit, oldest first. */
    struct jent *jhead, **jtail;
    struct jent **mark;      /* jtail at the open savepoint, or NULL */
    size_t jlen;             /* its entries but J_FIRST ones */
    /* Writes kept pending for db_flush() (db_batch.c): those in the
     * journal from *pend on whose 'pending' is set, 'npend' of them. */
    struct jent **pend;
    size_t npend;
    sqlite3_stmt *evst[EV_ROWS + 1]; /* insert of N events, by N */
    sqlite3_stmt **updst;    /* U_COMBOS UPDATEs of a task, by the
                                columns they set (db_batch.c) */
    struct jent **v;         /* db_flush()'s scratch: the entries, */
    struct upd *upd;         /* ... each task's merged change, */
    uint32_t *ix;            /* ... an entry's change in upd (or -1), */
    size_t capv;
    uint32_t *tab;           /* ... the changes by task id, */
    size_t captab, tabmask;
    sqlite3_stmt *insst[INS_ROWS + 1]; /* insert of N tasks, by N
                                          (db_insert.c) */
    char *jb;                /* ... the JSON texts of its rows */
    size_t jblen, jbcap;
    int failed;              /* errno of the failed commit, 0: none */
    char why[160];           /* ... and its text */
    double failed_at;        /* ... and when (s since the epoch) */
    char dir[4096];          /* the database's directory (statvfs) */
};


/* The error of the last SQLite call as errno and text ("database: WHAT:
 * ..."): the one map from SQLite codes to errno.  Returns -1. */
int db_err(struct pl_db *db, struct pl_error *errp, const char *what);
/* Run statement 'which' to completion and reset it.  0, or -1 (errp). */
int db_step(struct pl_db *db, int which, struct pl_error *errp);
/* Open the transaction if none is open. */
int db_begin(struct pl_db *db, struct pl_error *errp);
/* Bind 's' (copied), or NULL, to parameter 'i'. */
void db_bind_text(sqlite3_stmt *st, int i, const char *s);
/* Insert an events row (statement ST_EVENT or ST_EVENT_IF); 'rank' < 0:
 * the task's own event. */
int db_event(struct pl_db *db, int which, uint64_t id, double now, int state,
             uint32_t attempt, const char *node, const char *cores,
             const char *gpus, const char *detail, int64_t rank,
             struct pl_error *errp);
/* The errno and text of the failed commit, for a write refused while it
 * holds.  Returns -1. */
int db_refuse(struct pl_db *db, struct pl_error *errp);
/* A new journal entry whose s[] holds copies of the 'n' strings 'v'
 * (each may be NULL).  NULL: out of memory. */
struct jent *jent_new(enum jkind kind, const char *const *v, int n);
/* Keep 'j' (taken) in the journal and, unless the commit has failed, do
 * it in the open transaction (db.c's write_j()). */
int db_write_j(struct pl_db *db, struct jent *j, struct pl_error *errp);
/* Write the pending changes and events (db_batch.c): before a commit, a
 * savepoint, or a read of tasks or events.  0, or -1 (errp): the
 * transaction is lost (db_txn_lost()), the journal keeps the writes. */
int db_flush(struct pl_db *db, struct pl_error *errp);
/* Write state change 'c' now: its UPDATE and its event (the replay of
 * a failed commit).  ENOENT: the task has no row. */
int db_change_one(struct pl_db *db, const struct pl_db_change *c,
                  struct pl_error *errp);
/* Free what db_batch.c holds. */
void db_batch_free(struct pl_db *db);
/* Free what db_insert.c holds. */
void db_insert_free(struct pl_db *db);
/* The open transaction is lost (rolled back): the journal is the only
 * copy of its writes until the retry; errno and 'errp' say why. */
void db_txn_lost(struct pl_db *db, const struct pl_error *errp);
/* Do the J_RESULT write 'j' (db_py.c). */
int db_result_apply(struct pl_db *db, const struct jent *j,
                    struct pl_error *errp);

#endif /* !PL_DAEMON_DB_PRIVATE_H */
