/* proto/query.h - read-only queries of a pilot's state, as JSON values
 *
 * pilotd answers list/show/counts with these on its own connection; the
 * CLI runs the same queries on a read-only connection when the pilot is
 * down, so the two never disagree on what a task looks like. */
#ifndef PL_PROTO_QUERY_H
#define PL_PROTO_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <sqlite3.h>

#include "proto/error.h"

/* Open the state database at 'path' read-only.  NULL with errp set. */
sqlite3 *pl_query_open(const char *path, struct pl_error *errp);

/* For the query files: column 'i' of the row 'st' as JSON (its
 * type kept, NULL as null); and 'what' failed in 'db', into errp
 * (errno EIO): returns -1. */
json_t *pl_query_col(sqlite3_stmt *st, int i);
int pl_query_dberr(sqlite3 *db, struct pl_error *errp, const char *what);

/* Tasks as an array of objects: oldest first, or in the order of 'ids'
 * when given (nids > 0; unknown ids are skipped).  'state' (may be NULL)
 * filters by state name; 'tags' (NULL-terminated, may be NULL) by tags,
 * each "KEY=VALUE" (that value) or "KEY" (any value), all of them; keys
 * are [A-Za-z0-9_.-].  'limit' 0 means all. */
#define PL_QUERY_MAX_TAGS 16
json_t *pl_query_tasks(sqlite3 *db, const char *state,
                       const char *const *tags, const uint64_t *ids,
                       size_t nids, uint64_t limit, struct pl_error *errp);
/* The same, a page after task 'after' (0: from the start): without
 * 'ids', the tasks of larger ids; with them, those after the first
 * entry that is 'after' (none if no entry is). */
json_t *pl_query_tasks_after(sqlite3 *db, const char *state,
                             const char *const *tags, const uint64_t *ids,
                             size_t nids, uint64_t after, uint64_t limit,
                             struct pl_error *errp);

/* The tasks a selection names, in its order, each once, into *out
 * (malloc'd, *nout of them): each of 'ids' is its task, or, with
 * 'expand', every element of an array when it is the array's id (its
 * first element's id; without 'expand' it stays that id, as
 * pl_query_counts() takes it); each pair of 'elems' (nelems pairs: array
 * id, index) is that element.  Unknown ids are passed through (the
 * caller says they are unknown); an unknown element is an error
 * (ENOENT).  0, or -1 with errp set. */
int pl_query_resolve(sqlite3 *db, const uint64_t *ids, size_t nids,
                     const uint64_t *elems, size_t nelems, bool expand,
                     uint64_t **out, size_t *nout, struct pl_error *errp);

/* One task with its events; NULL with errno ENOENT if unknown. */
json_t *pl_query_task(sqlite3 *db, uint64_t id, struct pl_error *errp);

/* {"total": N, "<state>": N ..., "unknown": [ids]} over 'ids', each
 * task once (an array's id: all its elements, as pl_query_resolve()
 * says), or over all tasks when nids is 0. */
json_t *pl_query_counts(sqlite3 *db, const uint64_t *ids, size_t nids,
                        struct pl_error *errp);

/* The results of the Python calls 'ids' (n of them, each one task), in
 * one statement (one read transaction), as an array of one entry per
 * id in order: {"id", "status": "ok" or "raised" (show's result_status),
 * "size": bytes of the pickle, and "result": the pickle in base64, or
 * "result_file": its path}; {"id", "status": null} for a task with no
 * result (not ended, not a call, no such task).  Once the entries hold
 * 'budget' bytes of results (at least one entry is whole), the rest are
 * {"id", "more": true}.  query_py.c.  NULL with errp set. */
json_t *pl_query_results(sqlite3 *db, const uint64_t *ids, size_t n,
                         size_t budget, struct pl_error *errp);

/* The node table as an array of objects. */
json_t *pl_query_nodes(sqlite3 *db, struct pl_error *errp);

/* Status's "vet" object of a node (new reference): 'state' ("ok",
 * "failed", "running", "none"; NULL: from 'vet'), its vetting's 'time'
 * (0: none), its 'cordon' (may be NULL) and its last vetting as stored
 * ('vet', nodes.vet's JSON, may be NULL): {state, time, cordon, took?,
 * and for a failed one check, figure, limit, unit, detail}.  pilotd's
 * status and the CLI's of a pilot that is down both make it here. */
json_t *pl_query_vet_status(const char *state, double time,
                            const char *cordon, const char *vet);
/* TIMELINE (proto/tlmsg.h): one page of the tasks of 'q' (its
 * selection resolved into 'ids', nids of them, in their order; no
 * selection: all tasks but pools' own jobs, by id; a selection that
 * resolved to none: no task) after q->after, at most q->limit
 * (PL_TL_PAGE) of them and about PL_TL_PAGE_RANKS rank rows, as
 * {"tasks": [...], "more": bool, "nodes": pl_query_nodes() (on the first
 * page only)}; docs/protocol.md has a task's fields.  query_tl.c.  NULL
 * with errp set. */
struct pl_tl_req;
json_t *pl_query_timeline(sqlite3 *db, const struct pl_tl_req *q,
                          const uint64_t *ids, size_t nids,
                          struct pl_error *errp);

/* "1,2,3" -> [1,2,3] (new reference); NULL or "" -> []. */
json_t *pl_query_intlist(const char *s);

#endif /* !PL_PROTO_QUERY_H */
