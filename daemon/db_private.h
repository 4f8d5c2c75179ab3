/* daemon/db_private.h - what the files of daemon/db share (db.c,
 * db_task.c, db_meta.c) */
#ifndef PL_DAEMON_DB_PRIVATE_H
#define PL_DAEMON_DB_PRIVATE_H

#include <sqlite3.h>

#include "daemon/db.h"

/* The prepared statements (db.c's sql[]). */
enum {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_INSERT,
    ST_EVENT,
    ST_CHANGE,
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
 * kept to be done again when the commit fails. */
enum jkind { J_CHANGE = 1, J_RANK, J_NODE, J_META, J_RESULT, J_NODE_VET };

struct jent {
    struct jent *next;
    enum jkind kind;
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
    size_t jlen;
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
/* Do the J_RESULT write 'j' (db_py.c). */
int db_result_apply(struct pl_db *db, const struct jent *j,
                    struct pl_error *errp);

#endif /* !PL_DAEMON_DB_PRIVATE_H */
