/* proto/clientmsg.h - the requests a client sends pilotd (101-111, 114, 115)
 *
 * Each request has its encoder (the CLI's) and its decoder (pilotd's,
 * which checks every field before a handler sees it); the replies are
 * JSON data (proto/mpjson.h) under the envelope's REPLY.  The task
 * specs of a submit are proto/spec.h's.  docs/protocol.md has the
 * fields.
 */
#ifndef PL_PROTO_CLIENTMSG_H
#define PL_PROTO_CLIENTMSG_H

#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>

#include "proto/error.h"
#include "proto/msg.h"
#include "proto/spec.h"

/* Task ids one request may carry: each is a lookup, 7 us here, so 0.7 s
 * at most (a million held pilotd for 7.5 s). */
#define PL_REQ_MAX_IDS 100000
#define PL_REQ_MAX_TAG 512          /* bytes of one "KEY=VALUE" or "KEY" */

/* The tasks a request names: 'ids' (tasks, or arrays: all their
 * elements) and 'elems' (pairs: array id, index).  Owned. */
struct pl_sel_req {
    uint64_t *ids;
    uint32_t nids;
    uint64_t *elems;
    uint32_t nelems;       /* pairs */
};

/* LIST, and the selection alone for COUNTS and CANCEL. */
struct pl_list_req {
    char *state;           /* a state's name, or NULL: any */
    char **tags;           /* "KEY=VALUE" or "KEY", or NULL */
    uint64_t limit;        /* 0: no limit */
    uint64_t after;        /* a page after the task of this id (the last
                              of the page before); 0: the first page */
    struct pl_sel_req sel;
};

/* Tasks in one list reply at most: pilotd makes them in one turn of its
 * loop, about 45 us each; a listing of more is asked for in pages. */
#define PL_LIST_PAGE 2000

/* SHOW: one task, by id or as an array's element. */
struct pl_show_req {
    bool by_elem;
    uint64_t id;           /* a task id, or with by_elem the array's */
    uint64_t index;        /* with by_elem */
};

/* Each encoder builds the whole message in 'w' (pl_wbuf_destroy()).
 * Each decoder fills its request (cleared first; owned: _clear()) and
 * returns 0, or -1 with errp set (errno EPROTO, EINVAL, ENOMEM) and
 * nothing held. */
void pl_sel_req_encode(struct pl_wbuf *w, int type, uint64_t seq,
                       const struct pl_sel_req *s);
int pl_sel_req_decode(const msgpack_object *body, struct pl_sel_req *s,
                      struct pl_error *errp);
void pl_sel_req_clear(struct pl_sel_req *s);
bool pl_sel_req_given(const struct pl_sel_req *s);

void pl_list_req_encode(struct pl_wbuf *w, uint64_t seq,
                        const struct pl_list_req *l);
int pl_list_req_decode(const msgpack_object *body, struct pl_list_req *l,
                       struct pl_error *errp);
void pl_list_req_clear(struct pl_list_req *l);

void pl_show_req_encode(struct pl_wbuf *w, uint64_t seq,
                        const struct pl_show_req *s);
int pl_show_req_decode(const msgpack_object *body, struct pl_show_req *s,
                       struct pl_error *errp);

/* EXPLAIN (115): why one task does not run yet, named as SHOW names
 * it (an id, or an array's element); the same fields, checked alike.
 * The reply is daemon/explain.h's JSON. */
void pl_explain_req_encode(struct pl_wbuf *w, uint64_t seq,
                           const struct pl_show_req *s);
int pl_explain_req_decode(const msgpack_object *body,
                          struct pl_show_req *s, struct pl_error *errp);

/* POOL_START (109): a pool of workers, one MPI job (docs/pool.md);
 * POOL_STOP (110) names one; POOL_LIST (111) has no fields. */
struct pl_pool_req {
    char name[PL_POOL_NAME_MAX + 1];
    uint64_t nodes;        /* this many of the pilot's nodes; 0: all */
    uint64_t rpn;          /* workers per node, >= 1 */
    uint64_t cpr, gpr;     /* cores (>= 1) and GPUs of each worker */
    int launcher;          /* enum pl_launcher */
    char **env;            /* KEY=VALUE for its workers, or NULL; owned
                              when decoded (pl_pool_req_clear()) */
};
void pl_pool_req_clear(struct pl_pool_req *p);
/* 'spec' as pilot up --pool and pilotd --pool take it,
 * NAME:WORKERS_PER_NODE[:GPUS_PER_WORKER[:CORES_PER_WORKER]], into 'p'
 * (on all the pilot's nodes).  0, or -1 with errp (EINVAL). */
int pl_pool_spec_parse(const char *spec, struct pl_pool_req *p,
                       struct pl_error *errp);
/* The rules of a pool's shape: 0, or -1 with errp (EINVAL). */
int pl_pool_req_check(const struct pl_pool_req *p, struct pl_error *errp);
void pl_pool_req_encode(struct pl_wbuf *w, int type, uint64_t seq,
                        const struct pl_pool_req *p);
/* 'type' is the message's: POOL_STOP reads the name alone. */
int pl_pool_req_decode(const msgpack_object *body, int type,
                       struct pl_pool_req *p, struct pl_error *errp);

/* SUBMIT: pl_submit_begin() and exactly 'n' pl_spec_encode(); pilotd
 * takes the specs (borrowed) one by one to pl_spec_decode().  With
 * 'watch' (a token, proto/watchmsg.h; NULL: none) the tasks made join
 * that watch before the reply (pl_submit_watch_decode()). */
void pl_submit_begin(struct pl_wbuf *w, uint64_t seq, uint32_t n);
void pl_submit_begin_watch(struct pl_wbuf *w, uint64_t seq, uint32_t n,
                           const char *watch);
int pl_submit_decode(const msgpack_object *body,
                     const msgpack_object **specs, struct pl_error *errp);

/* RESULTS (114): the results of Python calls, by task id (each id is
 * that one task: an array's id is not its elements), 1 to
 * PL_RESULTS_MAX_IDS of them: pilotd reads them in one statement (one
 * read transaction), about 2 us an id and the bytes.  The reply is
 * proto/query.h's pl_query_results(): one entry per id, in order, with
 * at most PL_RESULTS_REPLY_MAX bytes of results (base64); the entries
 * after the cut are {"id": ID, "more": true}, to be asked again. */
#define PL_RESULTS_MAX_IDS 1000
#define PL_RESULTS_REPLY_MAX (PL_MSG_MAX / 2)
struct pl_results_req {
    uint64_t *ids;         /* task ids, each 1..INT64_MAX; owned when
                              decoded (pl_results_req_clear()) */
    uint32_t nids;
};
void pl_results_req_encode(struct pl_wbuf *w, uint64_t seq,
                           const struct pl_results_req *r);
int pl_results_req_decode(const msgpack_object *body,
                          struct pl_results_req *r, struct pl_error *errp);
void pl_results_req_clear(struct pl_results_req *r);

#endif /* !PL_PROTO_CLIENTMSG_H */
