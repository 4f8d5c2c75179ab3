/* daemon/clients.c - the client socket: requests and their replies
 *
 * Requests go through a table by type; each is decoded and checked by
 * proto/clientmsg.h before its handler acts, and answered once the batch
 * has committed (outq.c).  Reads (list, show, counts, results) are the same
 * proto/query.c queries the CLI runs on the database of a pilot that is
 * down.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/auth.h"
#include "daemon/daemon_private.h"
#include "daemon/explain.h"
#include "daemon/metrics.h"
#include "daemon/pool.h"
#include "proto/clientmsg.h"
#include "proto/log.h"
#include "proto/query.h"
#include "proto/strv.h"
#include "proto/tlmsg.h"
#include "proto/zwatch.h"


/* The tasks of selection 's' (arrays: all their elements, unless
 * 'expand' is false: then an array stays its id, for pl_query_counts())
 * into *ids (owned) and *n.  0, or -1 with errp. */
static int sel_ids(struct pl_daemon *d, const struct pl_sel_req *s,
                   bool expand, uint64_t **ids, size_t *n,
                   struct pl_error *errp)
{
    return pl_query_resolve(pl_db_handle(d->db), s->ids, s->nids, s->elems,
                            s->nelems, expand, ids, n, errp);
}

static void h_list(struct pl_daemon *d, const struct pl_req *r,
                   const struct pl_msg *m)
{
    struct pl_error err;
    struct pl_list_req l;
    uint64_t *ids = NULL;
    size_t nids = 0;
    json_t *res;

    if (pl_list_req_decode(m->body, &l, &err) < 0) {
        pl_out_err(d, r, errno, err.text);
        return;
    }
    if (sel_ids(d, &l.sel, true, &ids, &nids, &err) < 0)
        goto bad;
    if (pl_sel_req_given(&l.sel) && nids == 0) {
        pl_out_json(d, r, json_array());
        goto done;
    }
    /* one page: at most PL_LIST_PAGE task objects in one turn of the
     * loop (100,000 held it 4.6 s); the client asks for the next one
     * after the last task of this */
    if (!(res = pl_query_tasks_after(pl_db_handle(d->db), l.state,
                                     (const char *const *)l.tags, ids, nids,
                                     l.after,
                                     l.limit && l.limit < PL_LIST_PAGE
                                         ? l.limit : PL_LIST_PAGE,
                                     &err)))
        goto bad;
    pl_out_json(d, r, res);
    goto done;
bad:
    pl_out_err(d, r, errno, err.text);
done:
    pl_list_req_clear(&l);
    free(ids);
}

/* The task a SHOW or EXPLAIN names: its id, or its array's element
 * resolved.  0, or -1 with errp. */
static int show_id(struct pl_daemon *d, const struct pl_show_req *s,
                   uint64_t *id, struct pl_error *errp)
{
    uint64_t el[2] = { s->id, s->index }, *res = NULL;
    size_t n = 0;

    *id = s->id;
    if (!s->by_elem)
        return 0;
    if (pl_query_resolve(pl_db_handle(d->db), NULL, 0, el, 1, true, &res,
                         &n, errp) < 0)
        return -1;
    *id = res[0];
    free(res);
    return 0;
}

static void h_show(struct pl_daemon *d, const struct pl_req *r,
                   const struct pl_msg *m)
{
    struct pl_error err;
    struct pl_show_req s;
    uint64_t id;
    json_t *res;

    if (pl_show_req_decode(m->body, &s, &err) < 0
        || show_id(d, &s, &id, &err) < 0
        || !(res = pl_query_task(pl_db_handle(d->db), id, &err))) {
        pl_out_err(d, r, errno, err.text);
        return;
    }
    pl_out_json(d, r, res);
}

/* TIMELINE: a page of a report's tasks with their ranks' placement
 * (proto/tlmsg.h), PL_TL_PAGE at most in one turn of the loop. */
static void h_timeline(struct pl_daemon *d, const struct pl_req *r,
                       const struct pl_msg *m)
{
    struct pl_error err;
    struct pl_tl_req q;
    uint64_t *ids = NULL;
    size_t nids = 0;
    json_t *res;

    if (pl_tl_req_decode(m->body, &q, &err) < 0) {
        pl_out_err(d, r, errno, err.text);
        return;
    }
    if (sel_ids(d, &q.sel, true, &ids, &nids, &err) < 0
        || !(res = pl_query_timeline(pl_db_handle(d->db), &q, ids, nids,
                                     &err)))
        goto bad;
    pl_out_json(d, r, res);
    goto done;
bad:
    pl_out_err(d, r, errno, err.text);
done:
    pl_tl_req_clear(&q);
    free(ids);
}

/* RESULTS: many calls' results in one reply (proto/clientmsg.h). */
static void h_results(struct pl_daemon *d, const struct pl_req *r,
                      const struct pl_msg *m)
{
    struct pl_error err;
    struct pl_results_req q;
    json_t *res;

    if (pl_results_req_decode(m->body, &q, &err) < 0) {
        pl_out_err(d, r, errno, err.text);
        return;
    }
    if (!(res = pl_query_results(pl_db_handle(d->db), q.ids, q.nids,
                                 PL_RESULTS_REPLY_MAX, &err)))
        pl_out_err(d, r, errno, err.text);
    else
        pl_out_json(d, r, res);
    pl_results_req_clear(&q);
}

static void h_counts(struct pl_daemon *d, const struct pl_req *r,
                     const struct pl_msg *m)
{
    struct pl_error err;
    struct pl_sel_req s;
    uint64_t *ids = NULL;
    size_t nids = 0;
    json_t *res = NULL;

    if (pl_sel_req_decode(m->body, &s, &err) < 0) {
        pl_out_err(d, r, errno, err.text);
        return;
    }
    if (sel_ids(d, &s, false, &ids, &nids, &err) < 0)
        goto bad;
    if (pl_sel_req_given(&s)) {
        if (!(res = pl_query_counts(pl_db_handle(d->db), ids, nids, &err)))
            goto bad;
    }
    else {
        /* all tasks: from the counters, not a scan of the table */
        res = json_object();
        for (int st = 1; st < PL_ST_COUNT; st++)
            json_object_set_new(res, pl_state_name(st),
                                json_integer(d->count[st]));
        json_object_set_new(res, "total", json_integer(d->total));
        json_object_set_new(res, "unknown", json_array());
    }
    pl_out_json(d, r, res);
    goto done;
bad:
    pl_out_err(d, r, errno, err.text);
done:
    pl_sel_req_clear(&s);
    free(ids);
}

/* EXPLAIN: why a task does not run yet (daemon/explain.h), with its
 * name from the database. */
static void h_explain(struct pl_daemon *d, const struct pl_req *r,
                      const struct pl_msg *m)
{
    struct pl_error err;
    struct pl_show_req s;
    uint64_t id;
    json_t *row = NULL, *res = NULL;
    struct pl_dtask *t;

    if (pl_explain_req_decode(m->body, &s, &err) < 0
        || show_id(d, &s, &id, &err) < 0)
        goto bad;
    if (!(row = pl_query_task(pl_db_handle(d->db), id, &err)))
        goto bad;
    t = pl_sched_task_get(d->sched, id);
    /* a running task's row has its start; one that waits, the
     * scheduler's view */
    if (t && t->state != PL_ST_RUNNING)
        res = pl_explain_live(d->sched, t);
    else
        res = pl_explain_row(row);
    if (!res) {
        errno = ENOMEM;
        pl_errprintf(&err, "explain: out of memory");
        goto bad;
    }
    json_object_set(res, "name", json_object_get(row, "name"));
    pl_out_json(d, r, res);
    goto done;
bad:
    pl_out_err(d, r, errno, err.text);
done:
    json_decref(row);
}

/* The running tasks a status lists per node, and in all (a live 'pilot
 * top' asks every second: 1,000 nodes' names cost about 20 ms). */
#define STATUS_NODE_TASKS 10
#define STATUS_TASKS_MAX 2000

/* Up to STATUS_NODE_TASKS of the tasks holding cores or GPUs of 'n' as
 * [{id, name, cmd}] (cmd: argv[0]), their names from the database
 * ('st': SELECT name of a task, or NULL); '*budget' counts down the
 * names of the whole reply. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* How many tasks hold cores or GPUs of 'n' (a task of several ranks
 * there counts once; n->running counts ranks). */
static size_t node_holders(const struct pl_node *n)
{
    size_t m = 0, k = 0;
    uint64_t *all = malloc(((size_t)n->ncores + n->ngpus + 1)
                           * sizeof(*all));

    if (!all)
        return n->running;
    for (uint32_t i = 0; i < n->ncores; i++)
        if (n->core_task[i])
            all[m++] = n->core_task[i];
    for (uint32_t i = 0; i < n->ngpus; i++)
        if (n->gpu_task[i])
            all[m++] = n->gpu_task[i];
    qsort(all, m, sizeof(*all), cmp_u64);
    for (size_t i = 0; i < m; i++)
        k += i == 0 || all[i] != all[i - 1];
    free(all);
    return k;
}

static json_t *node_tasks(struct pl_sched *sc, const struct pl_node *n,
                          sqlite3_stmt *st, size_t *budget)
{
    uint64_t ids[STATUS_NODE_TASKS];
    size_t k = 0;
    json_t *arr = json_array();

    /* the holders of its cores and GPUs: O(cores), where a walk of the
     * live tasks would be O(tasks) per node */
    for (uint32_t i = 0; i < n->ncores + n->ngpus && k < STATUS_NODE_TASKS;
         i++) {
        uint64_t id = i < n->ncores ? n->core_task[i]
                                    : n->gpu_task[i - n->ncores];
        bool seen = !id;
        for (size_t j = 0; j < k && !seen; j++)
            seen = ids[j] == id;
        if (!seen)
            ids[k++] = id;
    }
    for (size_t j = 0; j < k && *budget > 0; j++, (*budget)--) {
        json_t *name = NULL;
        if (st) {
            sqlite3_reset(st);
            sqlite3_bind_int64(st, 1, (sqlite3_int64)ids[j]);
            if (sqlite3_step(st) == SQLITE_ROW
                && sqlite3_column_type(st, 0) == SQLITE_TEXT)
                name = json_string((const char *)sqlite3_column_text(st, 0));
        }
        struct pl_dtask *t = pl_sched_task_get(sc, ids[j]);
        const char *cmd = t && t->argv && t->argv[0] ? t->argv[0] : NULL;
        json_array_append_new(arr, json_pack("{s:I, s:o?, s:s?}", "id",
                                             (json_int_t)ids[j], "name",
                                             name, "cmd", cmd));
    }
    return arr;
}

/* The nodes, for status. */
static json_t *status_nodes(struct pl_daemon *d, json_t *s)
{
    json_t *nodes = json_array();
    long long cb = 0, ct = 0, gb = 0, gt = 0, up = 0;
    sqlite3_stmt *names = NULL;
    size_t budget = STATUS_TASKS_MAX;

    if (sqlite3_prepare_v2(pl_db_handle(d->db), "SELECT name FROM tasks "
                           "WHERE id = ?1", -1, &names, NULL) != SQLITE_OK) {
        sqlite3_finalize(names);
        names = NULL; /* the tasks go without their names */
    }

    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++) {
        struct pl_node *n = pl_sched_node_at(d->sched, k);
        const struct pl_link *l = pl_agents_link(d, n);
        const char *st = n->state == PL_NODE_UP     ? "up"
                         : n->state == PL_NODE_LOST ? "lost"
                                                    : "gone";
        json_t *o = json_object(), *gpus = json_array();
        json_t *cores = json_array();
        for (uint32_t i = 0; i < n->ncores; i++)
            json_array_append_new(cores, json_integer((json_int_t)n->cpu[i]));
        for (uint32_t i = 0; i < n->ngpus; i++)
            json_array_append_new(gpus, json_string(n->gpu[i]));
        json_object_set_new(o, "name", json_string(n->name));
        json_object_set_new(o, "state", json_string(st));
        json_object_set_new(o, "cores", cores);
        json_object_set_new(o, "gpus", gpus);
        json_object_set_new(o, "cores_busy",
                            json_integer(n->ncores - n->free_cores));
        json_object_set_new(o, "gpus_busy",
                            json_integer(n->ngpus - n->free_gpus));
        json_object_set_new(o, "running", json_integer(n->running));
        uint64_t alloc = pl_alloc_of_node(d, n->name);
        json_object_set_new(o, "alloc", alloc ? json_integer((json_int_t)alloc)
                                              : json_null());
        json_object_set_new(o, "cordon", n->cordon ? json_string(n->cordon)
                                                   : json_null());
        json_t *tl = node_tasks(d->sched, n, names, &budget);
        size_t nl = json_array_size(tl), nh = node_holders(n);
        json_object_set_new(o, "tasks_more",
                            json_integer(nh > nl ? (json_int_t)(nh - nl)
                                                 : 0));
        json_object_set_new(o, "tasks", tl);
        /* what the pools' workers hold of it (within cores_busy) */
        long long pw = 0, pb = 0, pc = 0, pg = 0;
        for (size_t i = 0; i < d->npools; i++) {
            const struct pl_pool *p = d->pools[i];
            for (uint32_t w = 0; w < p->nslots; w++)
                if (p->slot[w].node == n) {
                    pw++;
                    pb += p->slot[w].task != 0;
                    pc += p->cpr;
                    pg += p->gpr;
                }
        }
        json_object_set_new(o, "pool_workers", json_integer(pw));
        json_object_set_new(o, "pool_busy", json_integer(pb));
        json_object_set_new(o, "pool_cores", json_integer(pc));
        json_object_set_new(o, "pool_gpus", json_integer(pg));
        json_object_set_new(o, "pid", json_integer(l ? l->pid : 0));
        json_object_set_new(o, "last_seen",
                            json_real(l ? l->last_seen : 0));
        /* its vetting (daemon/vet.c) */
        json_object_set_new(o, "vet", pl_vet_status(n));
        json_array_append_new(nodes, o);
        if (n->state == PL_NODE_UP) {
            up++;
            ct += n->ncores;
            cb += n->ncores - n->free_cores;
            gt += n->ngpus;
            gb += n->ngpus - n->free_gpus;
        }
    }
    sqlite3_finalize(names);
    json_object_set_new(s, "agents_expected",
                        json_integer(d->cfg.expected_agents));
    json_object_set_new(s, "agents_up", json_integer(up));
    json_object_set_new(s, "nodes", nodes);
    json_object_set_new(s, "cores", json_pack("{s:I, s:I}", "busy",
                                              (json_int_t)cb, "total",
                                              (json_int_t)ct));
    json_object_set_new(s, "gpus", json_pack("{s:I, s:I}", "busy",
                                             (json_int_t)gb, "total",
                                             (json_int_t)gt));
    return s;
}

static void h_status(struct pl_daemon *d, const struct pl_req *r,
                     const struct pl_msg *m)
{
    json_t *s = json_object(), *tasks = json_object();
    char why[PL_PATH_MAX + 240];
    (void)m;

    pl_daemon_end_time(d);
    for (int st = 1; st < PL_ST_COUNT; st++)
        json_object_set_new(tasks, pl_state_name(st),
                            json_integer(d->count[st]));
    json_object_set_new(tasks, "total", json_integer(d->total));
    json_object_set_new(s, "pilot", json_string(d->id));
    json_object_set_new(s, "mode", json_string(d->cfg.local ? "local"
                                                            : "slurm"));
    json_object_set_new(s, "state", json_string(d->stopping ? "stopping"
                                                            : "running"));
    /* the state directory: "ok", or why nothing new is stored */
    const char *store = pl_store_state(d, why, sizeof(why));
    json_object_set_new(s, "state_store", json_string(store));
    json_object_set_new(s, "state_store_error",
                        why[0] ? json_string(why) : json_null());
    json_object_set_new(s, "state_store_since",
                        why[0] && d->store_failed_since
                            ? json_real(d->store_failed_since)
                            : json_null());
    json_object_set_new(s, "unstored",
                        json_integer((json_int_t)pl_db_unstored(d->db)));
    json_object_set_new(s, "job", d->cfg.job > 0 ? json_integer(d->cfg.job)
                                                 : json_null());
    json_object_set_new(s, "host", json_string(d->host));
    json_object_set_new(s, "pid", json_integer(getpid()));
    json_object_set_new(s, "started", json_real(d->started));
    json_object_set_new(s, "end_time", d->end_time > 0
                                           ? json_integer(d->end_time)
                                           : json_null());
    json_object_set_new(s, "walltime_left",
                        d->end_time > 0
                            ? json_real(fmax(0, (double)d->end_time
                                                    - pl_now()))
                            : json_null());
    json_object_set_new(s, "longest_batch", json_real(d->longest_batch));
    json_object_set_new(s, "longest_batch_at",
                        d->longest_batch_at > 0
                            ? json_real(d->longest_batch_at)
                            : json_null());
    status_nodes(d, s);
    json_object_set_new(s, "allocs", pl_alloc_status(d));
    const char *murl = pl_metrics_url(d), *mpath = pl_metrics_path(d);
    json_object_set_new(s, "metrics", murl ? json_string(murl) : json_null());
    json_object_set_new(s, "metrics_file",
                        mpath ? json_string(mpath) : json_null());
    json_t *pools = json_array();
    for (size_t i = 0; pools && i < d->npools; i++) {
        const struct pl_pool *p = d->pools[i];
        json_array_append_new(pools, json_pack(
            "{s:s,s:s,s:I,s:I,s:I,s:I}", "name", p->name, "state",
            pl_pool_state_name(p->state), "workers", (json_int_t)p->nslots,
            "ready", (json_int_t)p->nready, "busy", (json_int_t)p->nbusy,
            "queued", (json_int_t)p->nqueued));
    }
    json_object_set_new(s, "pools", pools);
    json_object_set_new(s, "tasks", tasks);
    pl_out_json(d, r, s);
}

static void h_shutdown(struct pl_daemon *d, const struct pl_req *r,
                       const struct pl_msg *m)
{
    (void)m;
    pl_out_json(d, r, json_object());
    pl_daemon_stop(d, "shutdown requested");
}

/* Read the allow-list again ('pilot keys add' and 'revoke' ask, once
 * they have changed keys/allow/).  N.B. r->key is freed with the old
 * list. */
static void h_keys(struct pl_daemon *d, const struct pl_req *r,
                   const struct pl_msg *m)
{
    struct pl_error err;
    (void)m;

    if (pl_auth_reload(d->auth, &err) < 0) {
        pl_out_err(d, r, errno, err.text);
        return;
    }
    pl_watch_revoked(d);
    pl_out_json(d, r, json_pack("{s:I}", "keys",
                                (json_int_t)pl_auth_count(d->auth)));
}

/* Who may send what (docs/protocol.md, "Authentication"). */
#define R_ADMIN (1u << PL_ROLE_ADMIN)
#define R_WRITE (R_ADMIN | 1u << PL_ROLE_SUBMIT)
#define R_READ (R_WRITE | 1u << PL_ROLE_READ)

static const struct {
    int type;
    void (*fn)(struct pl_daemon *d, const struct pl_req *r,
               const struct pl_msg *m);
    unsigned roles;          /* 1 << enum pl_role: who may */
    const char *what;        /* "key 'x' (role read) may not WHAT" */
} htab[] = {
    { PL_MSG_SUBMIT, pl_submit, R_WRITE, "submit" },
    { PL_MSG_LIST, h_list, R_READ, "list tasks" },
    { PL_MSG_SHOW, h_show, R_READ, "show tasks" },
    { PL_MSG_CANCEL, pl_cancel, R_WRITE, "cancel tasks" },
    { PL_MSG_STATUS, h_status, R_READ, "ask for the status" },
    { PL_MSG_SHUTDOWN, h_shutdown, R_ADMIN, "shut the pilot down" },
    { PL_MSG_COUNTS, h_counts, R_READ, "count tasks" },
    { PL_MSG_KEYS, h_keys, R_ADMIN, "reload the allow-list" },
    { PL_MSG_POOL_START, pl_poolctl_start, R_WRITE, "start a pool" },
    { PL_MSG_POOL_STOP, pl_poolctl_stop, R_WRITE, "stop a pool" },
    { PL_MSG_POOL_LIST, pl_poolctl_list, R_READ, "list the pools" },
    { PL_MSG_WATCH, pl_watch_req, R_READ, "watch tasks" },
    { PL_MSG_UNWATCH, pl_unwatch_req, R_READ, "watch tasks" },
    { PL_MSG_RESULTS, h_results, R_READ, "read results" },
    { PL_MSG_EXPLAIN, h_explain, R_READ, "explain tasks" },
    { PL_MSG_VET_REQ, pl_vet_req, R_WRITE, "vet nodes" },
    { PL_MSG_CORDON, pl_cordon_req, R_ADMIN, "cordon nodes" },
    { PL_MSG_TIMELINE, h_timeline, R_READ, "read the timeline" },
    { PL_MSG_GROW, pl_alloc_grow_req, R_ADMIN, "grow the pilot" },
    { PL_MSG_SHRINK, pl_alloc_shrink_req, R_ADMIN, "shrink the pilot" },
    { PL_MSG_ALLOCS, pl_alloc_list_req, R_READ, "list the allocations" },
    { 0, NULL, 0, NULL },
};

/* Whether the key of the peer that sent the request may have it
 * handled; if not, the reply is queued.  The key is looked up in the
 * allow-list of now, not of the handshake: a key revoked since is
 * refused on the connections it has. */
static bool allowed(struct pl_daemon *d, struct pl_req *r, int k)
{
    if (!(r->key = pl_auth_peer(d->auth, d->peer))) {
        pl_daemon_bad_log(d, LOG_NOTICE, "refused a %s request: its key "
                          "is no longer in the allow-list",
                          pl_msg_type_name(htab[k].type));
        pl_out_err(d, r, EACCES, "this client's key is no longer in the "
                   "pilot's allow-list (revoked)");
        return false;
    }
    if (!(htab[k].roles & (1u << r->key->role))) {
        char text[160];
        snprintf(text, sizeof(text), "key '%s' (role %s) may not %s",
                 r->key->name, pl_role_name(r->key->role), htab[k].what);
        pl_daemon_bad_log(d, LOG_NOTICE, "refused: %s", text);
        pl_out_err(d, r, EACCES, text);
        return false;
    }
    return true;
}

/* One frame from routing id 'rid'. */
static void client_msg(struct pl_daemon *d, const void *rid, size_t ridlen,
                       const void *buf, size_t len)
{
    struct pl_req req = { rid, ridlen, 0, NULL }, *r = &req;
    struct pl_msg m;
    struct pl_error err;
    int k;

    if (pl_msg_decode(buf, len, &m, &err) < 0) {
        uint64_t v, seq = 0;
        if (pl_msg_peek(buf, len, &v, &seq) == 0 && v != PL_PROTO_VERSION)
            pl_errprintf(&err, "this pilotd speaks protocol %d, the client "
                         "%llu: use the pilot commands of the same version",
                         PL_PROTO_VERSION, (unsigned long long)v);
        pl_daemon_bad_log(d, LOG_INFO, "bad client message: %s", err.text);
        r->seq = seq;
        pl_out_err(d, r, EPROTO, err.text);
        return;
    }
    r->seq = m.seq;
    for (k = 0; htab[k].fn; k++)
        if (htab[k].type == m.type)
            break;
    errno = 0;
    if (!htab[k].fn)
        pl_out_err(d, r, EPROTO, "not a client request");
    else if (allowed(d, r, k))
        htab[k].fn(d, r, &m);
    pl_msg_release(&m);
}

void pl_clients_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct pl_daemon *d = arg;
    (void)zw;
    (void)revents;

    pl_daemon_recv(d, d->csock, client_msg, NULL);
}
