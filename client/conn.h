/* client/conn.h - the pilot a client talks to: pilotd, or its state DB
 *
 * A command asks for tasks, counts or the status the same way whether
 * the pilot runs (a request to pilotd) or not (the same proto/query.c
 * query on its state database, read-only): both give JSON of the shape
 * docs/protocol.md describes, and the command renders that.  Shared by
 * the CLI and libpilot: nothing here prints; notes for the person go to
 * the pl_find's note callback. */
#ifndef PL_CLIENT_CONN_H
#define PL_CLIENT_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <sqlite3.h>

#include "client/pilot.h"
#include "proto/clientmsg.h"
#include "proto/error.h"
#include "proto/rpc.h"
#include "proto/spec.h"
#include "proto/tlmsg.h"

/* What a command needs of the pilot. */
enum pl_conn_need {
    PL_CONN_READ = 1, /* a running pilot, else the last recorded state of
                         the chosen (or newest) one */
    PL_CONN_WRITE,    /* a running pilot */
    PL_CONN_STOP,     /* one to stop: running, else one still starting */
};

struct pl_conn {
    struct pl_find *find;   /* borrowed */
    struct pl_pilot pilot;  /* read-only for callers */
    struct pl_rpc *rpc;     /* pilotd, when the pilot runs */
    sqlite3 *db;            /* else its state, read-only */
    int timeout_ms;         /* a request's limit (find->timeout_ms) */
    char ep[256];           /* the endpoint 'rpc' is connected to */
};

/* Choose the pilot: --pilot/PILOT_ID, else the one running pilot (see
 * 'need' for what happens when none runs).  Fills 'p'.  Returns 0, or -1
 * with errp set ("no pilot running (start one with 'pilot up')",
 * "several pilots are running (p1, p3): ..."). */
int pl_conn_find(struct pl_find *f, int need, struct pl_pilot *p,
                 struct pl_error *errp);

/* Find the pilot and connect to it: to pilotd when it runs (with
 * CURVE, the client keys of f->keys or of the pilot's keys/ directory:
 * an error if they are missing or others may read them); for
 * PL_CONN_READ on a pilot that does not, open its state database and
 * say so in a note (f->note).  For PL_CONN_WRITE a pilot that does
 * not run is an error ("pilot p2 is stale: ...").  For PL_CONN_STOP
 * nothing is opened unless the pilot runs.  NULL with errp set. */
struct pl_conn *pl_conn_open(struct pl_find *f, int need,
                             struct pl_error *errp);
void pl_conn_free(struct pl_conn *c);

/* Connect to the pilotd of pilot 'p' (copied), whose endpoint has been
 * read, whatever its state: for 'pilot up', which waits for it.  NULL
 * with errp set. */
struct pl_conn *pl_conn_attach(struct pl_find *f, const struct pl_pilot *p,
                               struct pl_error *errp);

/* After a request failed: look at the pilot again and, if it no longer
 * runs, close the connection, open its state database and say so in a
 * note.  Returns true if it switched. */
bool pl_conn_recheck(struct pl_conn *c);

/* After a request failed on a pilot that still runs (pl_conn_recheck()
 * false): if its pilotd now listens on another endpoint (a local
 * pilot's pilotd was restarted), connect there.  Returns true if it did
 * (c->rpc is a new connection: the old one is freed). */
bool pl_conn_moved(struct pl_conn *c);

/* The reads, from pilotd or the database, as new JSON values.  NULL
 * with errno and errp set (ENOENT from show: "no task 12").
 * list: 'state', 'tags' (NULL-terminated "KEY=VALUE" or "KEY") and 'sel'
 * may be NULL, 'limit' 0 for all; show: the task ('one': its first id
 * or element) with its events; counts: over 'sel', or all tasks if it
 * is NULL; status: the status object (from the database: what it
 * recorded, with "state" saying why the pilot does not answer). */
json_t *pl_conn_list(struct pl_conn *c, const char *state,
                     const char *const *tags, const struct pl_sel_req *sel,
                     uint64_t limit, struct pl_error *errp);
json_t *pl_conn_show(struct pl_conn *c, const struct pl_sel_req *one,
                     struct pl_error *errp);
json_t *pl_conn_counts(struct pl_conn *c, const struct pl_sel_req *sel,
                       struct pl_error *errp);
json_t *pl_conn_status(struct pl_conn *c, struct pl_error *errp);
/* explain: why task 'one' (as for show) does not run yet, from pilotd
 * only (daemon/explain.h's object): ENOTCONN when the pilot is down. */
json_t *pl_conn_explain(struct pl_conn *c, const struct pl_sel_req *one,
                        struct pl_error *errp);
/* results: the results of the Python calls 'ids' (1 to
 * PL_RESULTS_MAX_IDS), an array as pl_query_results() makes it. */
json_t *pl_conn_results(struct pl_conn *c, const uint64_t *ids,
                        uint32_t n, struct pl_error *errp);

/* timeline: one page of the report's tasks 'q' asks for (TIMELINE,
 * proto/tlmsg.h), {"tasks", "more", "nodes" on the first page}. */
json_t *pl_conn_timeline(struct pl_conn *c, const struct pl_tl_req *q,
                         struct pl_error *errp);

/* The requests that change the pilot, to pilotd only.  Each returns
 * pilotd's reply data as a new JSON value (shutdown: 0), or NULL (-1)
 * with errno and errp set: ENOTCONN if the pilot does not run,
 * ETIMEDOUT if pilotd did not answer, or what pilotd replied.
 * submit: the 'n' specs (borrowed; checked: pl_spec_check()), at most
 * PL_SPEC_MAX_SUBMIT, as one request, the tasks it makes joining the
 * watch 'watch' (a token; NULL: none); cancel: the tasks of 'sel'. */
json_t *pl_conn_submit(struct pl_conn *c, const struct pl_spec *specs,
                       uint32_t n, const char *watch,
                       struct pl_error *errp);
json_t *pl_conn_cancel(struct pl_conn *c, const struct pl_sel_req *sel,
                       struct pl_error *errp);
int pl_conn_shutdown(struct pl_conn *c, struct pl_error *errp);
/* Ask pilotd to read its allow-list again (keys/allow/ changed):
 * {keys: N}, the keys it admits now.  Only the pilot's owner's key
 * (role admin) may: EACCES for the others. */
json_t *pl_conn_keys(struct pl_conn *c, struct pl_error *errp);

/* A pool request (POOL_START, POOL_STOP, POOL_LIST: 'p' may then be
 * NULL): the pool (an object) or the pools (an array). */
/* VET: vet 'nodes' (NULL: all) and wait up to 'wait_ms' for their
 * results (an array, one object per node).  CORDON: a node's cordon set
 * or lifted ({"node", "cordon"}).  NULL with errp. */
struct pl_cordon_req;
json_t *pl_conn_vet(struct pl_conn *c, char **nodes, int wait_ms,
                    struct pl_error *errp);
json_t *pl_conn_cordon(struct pl_conn *c, const struct pl_cordon_req *q,
                       struct pl_error *errp);
json_t *pl_conn_pool(struct pl_conn *c, int type,
                     const struct pl_pool_req *p, struct pl_error *errp);
/* GROW: the allocation, once sbatch took it ({"id", "job", ...}); SHRINK:
 * {"released": [ids]}; ALLOCS: {"allocs": [...], "grow": settings or
 * null} (docs/grow.md).  NULL with errp. */
struct pl_grow_req;
struct pl_shrink_req;
json_t *pl_conn_grow(struct pl_conn *c, const struct pl_grow_req *q,
                     struct pl_error *errp);
json_t *pl_conn_shrink(struct pl_conn *c, const struct pl_shrink_req *q,
                       struct pl_error *errp);
json_t *pl_conn_allocs(struct pl_conn *c, struct pl_error *errp);

#endif /* !PL_CLIENT_CONN_H */
