/* daemon/db.h - SQLite state: tasks, events, nodes (pilotd is the only writer) */
#ifndef PL_DAEMON_DB_H
#define PL_DAEMON_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "proto/error.h"
#include "proto/run.h"
#include "proto/spec.h"
#include "proto/usage.h"
#include "proto/watchmsg.h"

struct pl_db;

/* What a state change records besides the state itself.  node, cores,
 * gpus, exit_code, signal and maxrss_kb are left as they are in the task
 * row when NULL or negative; 'reason' is always written (NULL clears it). */
struct pl_db_change {
    uint64_t id;
    int state;           /* enum pl_state */
    uint32_t attempt;
    double time;
    const char *node;    /* where it is placed / ran */
    const char *cores;   /* "0,1" */
    const char *gpus;    /* "2,3" (Slurm GPU ids) */
    const char *reason;  /* why it failed / was canceled */
    int exit_code;       /* -1: none */
    int signal;          /* -1: none */
    int64_t maxrss_kb;   /* -1: none */
    const struct pl_usage *use; /* CPU and GPU figures (the measured ones
                            are written, the others left as they are);
                            NULL: none */
    uint64_t end_seq;    /* a final state's place in pilotd's end
                            sequence (tasks.end_seq); 0: none */
};

/* One dependency as stored: a task, or an array's every element unless
 * 'one' (element 0's id alone would mean the whole array), and whether
 * any end will do. */
struct pl_db_dep {
    uint64_t id;
    bool any;
    bool one;
};

/* A task to insert.  Borrowed.  The element of an array has its own
 * argv and name ('{}' replaced); else they are the spec's. */
struct pl_db_task {
    const struct pl_spec *spec;
    char *const *argv;         /* NULL: the spec's */
    const char *name;          /* NULL: the spec's */
    const struct pl_db_dep *after;
    uint32_t nafter;
    uint64_t array_id;         /* 0: not an array element (or element 0,
                                  marked with pl_db_task_array()) */
    uint64_t array_index;
    const char *submitted_by;  /* the name of the key that sent it */
};

/* A task not ended, as loaded: its spec as stored (argv, env, cwd and
 * the shape: owned by the row, a callback may take them by setting them
 * NULL), its dependencies and its attempts so far. */
struct pl_db_row {
    uint64_t id;
    int state;
    uint32_t attempts;
    struct pl_spec spec;
    struct pl_db_dep *after;   /* 'nafter', owned by the row */
    uint32_t nafter;
    uint64_t array_id;
    uint64_t array_index;
    uint32_t nrefs;            /* a Python call's refs (pyinputs.refs) */
};

/* Open (creating if needed) the database at 'path': WAL journal,
 * synchronous=NORMAL (a commit survives a crash of pilotd; only a power
 * loss may lose the last commits), the WAL cut back to 4 MiB after a
 * checkpoint, schema, quick_check.  NULL + errp. */
struct pl_db *pl_db_open(const char *path, struct pl_error *errp);
void pl_db_close(struct pl_db *db);

/* Borrowed: for read queries (proto/query.h) on the writer connection. */
sqlite3 *pl_db_handle(struct pl_db *db);

/* Writes open a transaction if none is open; pl_db_commit() ends it (group
 * commit: the daemon commits once per batch of messages).
 *
 * Every write but the insert of a submission (task changes, rank events,
 * node and meta rows) is also kept in memory, in the journal, until a
 * commit stores it.  When a commit fails (or a write fails for the disk
 * and SQLite rolls the transaction back) the database is 'failed': the
 * transaction is rolled back, so its submissions are not stored (the
 * caller undoes them), but its other writes stay in the journal.  While
 * failed, writes only go to the journal (they return 0), and inserts and
 * savepoints are refused with the errno of the failure; reads see the
 * last commit.  pl_db_commit() on a failed database is the retry: a new
 * transaction replays the journal (skipping writes for tasks that are not
 * in the database: their submission was undone), writes the meta row
 * 'store_failure' ("FAILED_AT STORED_AT WHY", times in s since the
 * epoch), and commits.  After ENOSPC it is not tried until the
 * directory has 256 KiB free (else a small retry could fit where the
 * next submission does not).
 *
 * pl_db_commit returns 0 once every write is stored, or -1 with errno
 * (ENOSPC, EDQUOT: full; EROFS: read-only; EIO, EBUSY, ...) and errp. */
int pl_db_commit(struct pl_db *db, struct pl_error *errp);

/* Give up every write not stored: the open transaction and the journal
 * (the database is no longer failed). */
void pl_db_rollback(struct pl_db *db);
int pl_db_in_txn(const struct pl_db *db);

/* Make what the last commits wrote to the WAL durable: an fsync of the
 * WAL file, as synchronous=FULL would do at every commit (commits run at
 * synchronous=NORMAL: they survive pilotd, and with this call a crash of
 * the node too).  0, or -1 with errno EIO and errp. */
int pl_db_sync(struct pl_db *db, struct pl_error *errp);

/* Copy what the WAL holds into the database (a passive checkpoint: it
 * never waits), outside a transaction; the next commit then writes the
 * WAL from its start.  pilotd calls it 4 times a second at most, so the
 * WAL stays small.  0, or -1 (errp): the database may have to grow and
 * the disk is full; nothing is lost. */
int pl_db_checkpoint(struct pl_db *db, struct pl_error *errp);

/* 0 if nothing waits for a failed commit, else its errno; *why (may be
 * NULL) is its text, borrowed until the next call on 'db'. */
int pl_db_failed(const struct pl_db *db, const char **why);

/* Writes in the journal: not stored yet. */
size_t pl_db_unstored(const struct pl_db *db);

/* A savepoint inside the open transaction, so that one request's writes
 * can be undone without losing the rest of the batch.  _end releases it
 * ('keep') or rolls back to it (the journal forgets its writes too) and
 * releases it.  One at a time.  Refused while the database is failed. */
int pl_db_savepoint(struct pl_db *db, struct pl_error *errp);
int pl_db_savepoint_end(struct pl_db *db, bool keep, struct pl_error *errp);

/* Insert a task in 'state' (queued or waiting) with its first event (a
 * queued one has none: schema 13, its submit_time is that event);
 * *id gets the new id.  argv, env and tags are stored as JSON text.  Not
 * journaled: a failed commit loses it, and the caller must forget the
 * task.  Returns 0 or -1 (errp; while failed, its errno; ENOMEM). */
int pl_db_task_insert(struct pl_db *db, const struct pl_db_task *t,
                      int state, double now, uint64_t *id,
                      struct pl_error *errp);
/* The same for the 'n' tasks 't' (db_insert.c): up to 64 rows a
 * statement; ids[i] gets t[i]'s id (consecutive).  On a failure some
 * of the rows may be in: the caller's savepoint undoes them. */
int pl_db_task_insert_n(struct pl_db *db, const struct pl_db_task *t,
                        size_t n, int state, double now, uint64_t *ids,
                        struct pl_error *errp);

/* Task 'id' (just inserted) is the first element of an array: its own
 * array_id, at 'index'. */
int pl_db_task_array(struct pl_db *db, uint64_t id, uint64_t index,
                     struct pl_error *errp);
/* The indexes of array 'id''s elements that ended failed or timeout, in
 * order, into *index (malloc'd, *nindex of them); *live: its elements
 * not ended yet.  The array's element count (0: 'id' is not an array's),
 * or -1 with errp set. */
long pl_db_array_failed(struct pl_db *db, uint64_t id, uint64_t **index,
                        uint64_t *nindex, uint64_t *live,
                        struct pl_error *errp);
/* Whether 'id' is an array's id (its element 0's): 1 or 0; and in
 * *taken, when it is, how many of its elements have an index in lo..hi.
 * -1 with errp set. */
int pl_db_array_range(struct pl_db *db, uint64_t id, uint64_t lo,
                      uint64_t hi, uint64_t *taken, struct pl_error *errp);
/* Call 'cb' for each task of array 'id' (none: 'id' is not an array's),
 * in order.  The count, or -1 with errp set (cb failed: ENOMEM). */
long pl_db_array_members(struct pl_db *db, uint64_t id,
                         int (*cb)(uint64_t id, int state, void *arg),
                         void *arg, struct pl_error *errp);
/* Record a state change: update the row, add the event.  Both are
 * written with the batch's others (db_batch.c), before the commit or a
 * read of tasks or events: a change of a task with no row is dropped
 * there, and logged.  The strings are copied.  0, or -1 with errp
 * (ENOMEM). */
int pl_db_task_change(struct pl_db *db, const struct pl_db_change *c,
                      struct pl_error *errp);

/* An event of rank 'rank' of a task (c->id): only an events row. */
int pl_db_rank_event(struct pl_db *db, const struct pl_db_change *c,
                     uint32_t rank, struct pl_error *errp);

/* Insert or update a node row ('joined' is 'now' for a new one). */
int pl_db_node_set(struct pl_db *db, const char *name, const char *cores,
                   const char *gpus, const char *state, double now,
                   struct pl_error *errp);

/* A node's cordon (NULL: none), its last vetting (JSON text, NULL: none)
 * and that vetting's time (0: NULL), on its row (made by
 * pl_db_node_set() when it registered).  get: *cordon and *vet are new
 * strings or NULL, *vet_time 0 when NULL; a node with no row gets all
 * three empty.  0, or -1 with errp. */
int pl_db_node_vet_set(struct pl_db *db, const char *name,
                       const char *cordon, const char *vet, double vet_time,
                       struct pl_error *errp);
int pl_db_node_vet_get(struct pl_db *db, const char *name, char **cordon,
                       char **vet, double *vet_time, struct pl_error *errp);

/* meta key/value. get: *val is a new string or NULL if absent. */
int pl_db_meta_set(struct pl_db *db, const char *key, const char *val,
                   struct pl_error *errp);

/* Call 'cb' for each meta row whose key starts with 'prefix' and whose
 * value is not NULL, in key order.  0, or -1 with errp (cb's -1:
 * ENOMEM). */
int pl_db_meta_list(struct pl_db *db, const char *prefix,
                    int (*cb)(const char *key, const char *val, void *arg),
                    void *arg, struct pl_error *errp);
int pl_db_meta_get(struct pl_db *db, const char *key, char **val,
                   struct pl_error *errp);

/* Where attempt 'attempt' of task 'id' ('ranks' ranks) was placed: 'cb'
 * once per rank found, with its node, CPU ids ("0,1") and GPU ids (NULL
 * if none), as recorded when it was assigned.  Strings are valid during
 * the call only. */
typedef void (*pl_db_place_f)(uint32_t rank, const char *node,
                              const char *cores, const char *gpus, void *arg);
int pl_db_placement(struct pl_db *db, uint64_t id, uint32_t attempt,
                    uint32_t ranks, pl_db_place_f cb, void *arg,
                    struct pl_error *errp);

/* Call 'cb' for each task not in a final state, oldest first, with what
 * is needed to rebuild the queue; the row is cleared after the call.  A
 * row whose stored argv cannot be read (it cannot happen: submit stored
 * a valid array) is skipped with a log line.  'cb' returns 0, or -1 to
 * stop (with errno). */
typedef int (*pl_db_live_f)(struct pl_db_row *row, void *arg);
int pl_db_load_live(struct pl_db *db, pl_db_live_f cb, void *arg,
                    struct pl_error *errp);
/* The same but for the plain queued ones (fn NULL), which
 * pl_db_queue_scan() lists: the assigned and running ('placed'), or the
 * queued calls and the waiting. */
int pl_db_load_unqueued(struct pl_db *db, bool placed, pl_db_live_f cb,
                        void *arg, struct pl_error *errp);
/* The same for the queued rows of ids 'lo' to 'hi'. */
int pl_db_load_range(struct pl_db *db, uint64_t lo, uint64_t hi,
                     pl_db_live_f cb, void *arg, struct pl_error *errp);
/* Every queued task's priority and id, in id order, from indexes alone
 * (a restart's queue of millions: no row is read).  'cb'
 * returns 0, or -1 to stop (errno). */
typedef int (*pl_db_queued_f)(int64_t priority, uint64_t id, void *arg);
int pl_db_queue_scan(struct pl_db *db, pl_db_queued_f cb, void *arg,
                     struct pl_error *errp);

/* The id of the latest task named 'name' (this transaction's included),
 * 0 if none, UINT64_MAX with errp set on error. */
uint64_t pl_db_task_by_name(struct pl_db *db, const char *name,
                            struct pl_error *errp);
/* The state of task 'id' (enum pl_state), 0 if there is no such task, or
 * -1 on error (errp). */
int pl_db_task_state(struct pl_db *db, uint64_t id, struct pl_error *errp);
/* The first of tasks 'ids' (n of them) not submitted with the key named
 * 'name' into *other (0: all were; a task with no row is skipped), and
 * the name of the key it was submitted with into 'by' ("" if none was
 * recorded: a task of an older pilotd).  0, or -1 with errp set. */
int pl_db_task_not_by(struct pl_db *db, const uint64_t *ids, size_t n,
                      const char *name, uint64_t *other, char *by,
                      size_t bylen, struct pl_error *errp);

/* ---- a Python call's input and result (db_py.c; docs/python-reference.md) ---- */

/* Store the input of the Python call 'id' (spec 's', fn pycall): its
 * pickled call or file, prelude and interpreter, or 'prelude' and
 * 'python' (the pilot's defaults, may be NULL) where 's' gives none.
 * Not journaled, as the task's own insert (pl_db_task_insert()).  0, or
 * -1 with errp set. */
int pl_db_pyinput_add(struct pl_db *db, uint64_t id, const struct pl_spec *s,
                      const char *prelude, const char *python,
                      struct pl_error *errp);

/* A call's input as read: each field owned, NULL when absent. */
struct pl_db_pyinput {
    unsigned char *input;
    size_t ninput;
    char *input_file, *prelude, *python;
    struct pl_run_ref *refs;   /* the results of its refs, as stored now
                                  (proto/run.h), 'nrefs' */
    uint32_t nrefs;
};
/* Read the input of call 'id' into 'in', with the result of each of its
 * refs (PL_PYR_NONE where there is none).  0, or -1 with errp (ENOENT:
 * there is none; ENOMEM; the database's). */
int pl_db_pyinput_get(struct pl_db *db, uint64_t id,
                      struct pl_db_pyinput *in, struct pl_error *errp);
void pl_db_pyinput_clear(struct pl_db_pyinput *in);

/* A copy (malloc()) of the pickle of call 'id''s result when it is
 * stored inline and is at most 'max' bytes, its size in *len; NULL
 * otherwise (no result, a larger one, one in a file, out of memory, a
 * database error: the client asks for it with RESULTS). */
void *pl_db_result_small(struct pl_db *db, uint64_t id, size_t max,
                         size_t *len);

/* Whether each of the 'n' refs of a call being submitted is a Python
 * call (fn pycall).  0, or -1 with errp: EINVAL "refs: no task 12",
 * "refs: task 12 is not a Python call", or the database's. */
int pl_db_refs_check(struct pl_db *db, const uint64_t *refs, uint32_t n,
                     struct pl_error *errp);

/* A call's result: its status (enum pl_pyr), its size, and the pickle
 * inline or the file holding it; 'repr' may be NULL.  Borrowed. */
struct pl_db_result {
    uint64_t id;
    uint32_t attempt;
    int status;
    int64_t size;
    const unsigned char *data;
    size_t ndata;
    const char *file;
    const char *repr;
};
/* Record result 'r' (replacing one of an earlier attempt), journaled as
 * a state change is: in the transaction of the call's end.  0, or -1
 * with errp set (ENOMEM). */
int pl_db_result_set(struct pl_db *db, const struct pl_db_result *r,
                     struct pl_error *errp);

/* ---- the ends a watch replays (db_task.c; daemon/watch.c) ---- */

/* The largest end seq stored (0: none), into *seq.  0, or -1 with errp. */
int pl_db_max_end_seq(struct pl_db *db, uint64_t *seq, struct pl_error *errp);
/* The ends stored with an end seq in after+1..upto, in order, at most
 * 'limit' of them: 'cb' for each, with its task's 'fn' (enum pl_fn:
 * PL_FN_POOL for a pool's own job, PL_FN_PYCALL for a Python call,
 * which may have a result; the others as PL_FN_NONE) (the end's reason
 * is valid during the call only); *last gets the last seq read
 * (unchanged if none).  The count read, or -1 with errp ('cb' returned
 * -1: its errno). */
typedef int (*pl_db_end_f)(const struct pl_end *e, int fn, void *arg);
long pl_db_ends(struct pl_db *db, uint64_t after, uint64_t upto,
                uint32_t limit, pl_db_end_f cb, void *arg, uint64_t *last,
                struct pl_error *errp);

#endif /* !PL_DAEMON_DB_H */
