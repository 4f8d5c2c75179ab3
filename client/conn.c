/* client/conn.c - the pilot a client talks to: pilotd, or its state DB;
 * the reads (the requests to pilotd alone: conn_ops.c) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/conn.h"
#include "client/conn_private.h"
#include "proto/allocmsg.h"
#include "proto/keys.h"
#include "proto/mpjson.h"
#include "proto/msg.h"
#include "proto/query.h"
#include "proto/vetmsg.h"

/* How many pilots without an endpoint to ask Slurm about when looking
 * for one that is still starting (each costs a call to slurmctld). */
#define STARTING_SCAN 16

static int nomem(struct pl_error *errp)
{
    errno = ENOMEM;
    return pl_errprintf(errp, "out of memory");
}

/* "p1, p3" from the ids in 'v' (n of them, newest first) */
static void join_ids(char **v, size_t n, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < n && off < len; i++) {
        int k = snprintf(buf + off, len - off, "%s%s", i ? ", " : "",
                         v[n - 1 - i]);
        if (k < 0)
            break;
        off += (size_t)k;
    }
}

static bool has_db(const char *home, const char *id)
{
    char dir[PL_PATH_MAX + 64], path[PL_PATH_MAX + 80];
    struct stat st;

    snprintf(dir, sizeof(dir), "%s/pilots/%s", home, id);
    pl_path_db(dir, path, sizeof(path));
    return stat(path, &st) == 0;
}

/* Load pilot 'id' for a look among all: 1 if it is there, 0 if it is
 * not (removed meanwhile), -1 if it may not be used (pl_pilotdir_path():
 * refused, with errp). */
static int load_any(struct pl_find *f, const char *home, const char *id,
                    struct pl_pilot *p, struct pl_error *errp)
{
    if (pl_pilot_load(f, home, id, p, errp) == 0)
        return 1;
    return errno == ENOENT ? 0 : -1;
}

/* Pilots still starting among those with no endpoint file, newest first,
 * into 'found' (borrowed from 'ids').  Returns how many, or -1 (a pilot
 * directory refused, errp). */
static ssize_t scan_starting(struct pl_find *f, const char *home,
                             char **ids, char **found, size_t max,
                             struct pl_pilot *first, struct pl_error *errp)
{
    size_t n = 0, asked = 0;

    for (size_t i = 0; ids[i] && asked < STARTING_SCAN && n < max; i++) {
        struct pl_pilot p;
        int rc;
        if (pl_pilot_has_endpoint(home, ids[i]))
            continue;
        asked++;
        if ((rc = load_any(f, home, ids[i], &p, errp)) < 0)
            return -1;
        if (rc == 0 || p.state != PL_PILOT_STARTING)
            continue;
        if (n == 0)
            *first = p;
        found[n++] = ids[i];
    }
    return (ssize_t)n;
}

static int not_running(const struct pl_pilot *p, struct pl_error *errp)
{
    errno = ENOTCONN;
    switch (p->state) {
    case PL_PILOT_STARTING:
        return pl_errprintf(errp, "pilot %s is not up yet: %s", p->id,
                            p->why);
    case PL_PILOT_STALE:
        return pl_errprintf(errp, "pilot %s is stale: %s; its final state "
                            "stays readable with --pilot %s", p->id, p->why,
                            p->id);
    default:
        return pl_errprintf(errp, "pilot %s is down; its final state stays "
                            "readable with --pilot %s", p->id, p->id);
    }
}

int pl_conn_find(struct pl_find *f, int need, struct pl_pilot *p,
                 struct pl_error *errp)
{
    char home[PL_PATH_MAX];
    char **ids = NULL;
    char *running[8], *stale[8];
    char list[200];
    size_t n = 0, nstale = 0;
    struct pl_pilot first_stale;

    if ((f->home ? pl_home_at(f->home, home, sizeof(home), errp)
                 : pl_home(home, sizeof(home), errp)) < 0)
        return -1;
    if (f->pilot)
        return pl_pilot_load(f, home, f->pilot, p, errp);
    if (!(ids = pl_pilotdir_list(home, errp)))
        return -1;
    for (size_t i = 0; ids[i]; i++) {
        struct pl_pilot q;
        int rc;
        if (!pl_pilot_has_endpoint(home, ids[i]))
            continue;
        if ((rc = load_any(f, home, ids[i], &q, errp)) < 0)
            goto error;
        if (rc == 0)
            continue;
        if (q.state == PL_PILOT_STALE && nstale < 8) {
            if (nstale == 0)
                first_stale = q;
            stale[nstale++] = ids[i];
        }
        if (q.state != PL_PILOT_RUNNING)
            continue;
        if (n == 0)
            *p = q;
        if (n < sizeof(running) / sizeof(running[0]))
            running[n] = ids[i];
        n++;
    }
    if (n == 1)
        goto done;
    if (n > 1) {
        join_ids(running, n < 8 ? n : 8, list, sizeof(list));
        errno = EEXIST;
        pl_errprintf(errp, "several pilots are running (%s%s): choose one "
                     "with --pilot ID or PILOT_ID", list, n > 8 ? ", ..." : "");
        goto error;
    }
    if (need == PL_CONN_READ && ids[0]) {
        /* the last state of the newest pilot that has one */
        size_t i = 0;
        while (ids[i + 1] && !has_db(home, ids[i]))
            i++;
        if (!has_db(home, ids[i]))
            i = 0;
        if (pl_pilot_load(f, home, ids[i], p, errp) < 0)
            goto error;
        goto done;
    }
    if (need == PL_CONN_WRITE || need == PL_CONN_STOP) {
        char *starting[8];
        ssize_t ns = scan_starting(f, home, ids, starting, 8, p, errp);
        if (ns < 0)
            goto error;
        if (ns == 1 && need == PL_CONN_STOP)
            goto done;
        if (ns == 0 && nstale == 1 && need == PL_CONN_STOP) {
            *p = first_stale; /* its endpoint is all there is to clear */
            goto done;
        }
        if (ns == 0 && nstale > 1 && need == PL_CONN_STOP) {
            join_ids(stale, nstale, list, sizeof(list));
            errno = EEXIST;
            pl_errprintf(errp, "no pilot running, several are stale (%s): "
                         "choose one with --pilot ID or PILOT_ID", list);
            goto error;
        }
        if (ns > 0) {
            join_ids(starting, (size_t)ns, list, sizeof(list));
            errno = ENOTCONN;
            if (ns == 1)
                pl_errprintf(errp, "no pilot running yet: %s is starting "
                             "(%s)", starting[0], p->why);
            else if (need == PL_CONN_STOP)
                pl_errprintf(errp, "several pilots are starting (%s): "
                             "choose one with --pilot ID or PILOT_ID", list);
            else
                pl_errprintf(errp, "no pilot running yet: %s are starting",
                             list);
            goto error;
        }
    }
    if (need == PL_CONN_WRITE && nstale > 0) {
        /* the newest stale one is the one its user most likely means */
        not_running(&first_stale, errp);
        goto error;
    }
    errno = ENOENT;
    pl_errprintf(errp, "no pilot running (start one with 'pilot up')");
error:
    pl_strv_free(ids);
    return -1;
done:
    pl_strv_free(ids);
    return 0;
}

/* Open the pilot's state database for reading, and say why. */
static int open_db(struct pl_conn *c, struct pl_error *errp)
{
    struct pl_pilot *p = &c->pilot;
    char path[PL_PATH_MAX + 16];
    char log[PL_PATH_MAX + 64];
    struct stat st;

    pl_path_db(p->dir, path, sizeof(path));
    if (stat(path, &st) < 0) {
        errno = ENOENT;
        if (p->state == PL_PILOT_STARTING)
            return pl_errprintf(errp, "pilot %s has no state yet: %s", p->id,
                                p->why);
        pl_pilot_log_path(p, log, sizeof(log));
        return pl_errprintf(errp, "pilot %s has no state: it never started "
                            "(see %s)", p->id, log);
    }
    if (!(c->db = pl_query_open(path, errp)))
        return -1;
    switch (p->state) {
    case PL_PILOT_STARTING:
        pl_find_note(c->find, "pilot %s is starting (%s): showing its "
                     "state so far", p->id, p->why);
        break;
    case PL_PILOT_STALE:
        pl_find_note(c->find, "pilot %s is not running (%s): showing its "
                     "last recorded state", p->id, p->why);
        break;
    default:
        pl_find_note(c->find, "pilot %s is down: showing its last recorded "
                     "state", p->id);
        break;
    }
    return 0;
}

/* Connect to the pilotd of c->pilot with the client keys of
 * $PILOT_KEYS, else of the pilot's directory (refused if others may
 * read them: see pl_keys_check()). */
static int connect_rpc(struct pl_conn *c, struct pl_error *errp)
{
    char kdir[PL_PATH_MAX + 16];
    struct pl_keys_peer keys;

    if (c->find->keys)
        snprintf(kdir, sizeof(kdir), "%s", c->find->keys);
    else
        pl_keys_path(c->pilot.dir, kdir, sizeof(kdir));
    if (pl_keys_load_peer(kdir, "client", &keys, errp) < 0)
        return -1;
    c->rpc = pl_rpc_new(c->pilot.ep.client, &keys, errp);
    explicit_bzero(&keys, sizeof(keys)); /* the rpc has its copy */
    snprintf(c->ep, sizeof(c->ep), "%s", c->pilot.ep.client);
    return c->rpc ? 0 : -1;
}

static struct pl_conn *conn_new(struct pl_find *f, struct pl_error *errp)
{
    struct pl_conn *c;

    if (!(c = calloc(1, sizeof(*c)))) {
        nomem(errp);
        return NULL;
    }
    c->find = f;
    c->timeout_ms = f->timeout_ms;
    return c;
}

struct pl_conn *pl_conn_open(struct pl_find *f, int need,
                             struct pl_error *errp)
{
    struct pl_conn *c;

    if (!(c = conn_new(f, errp)))
        return NULL;
    if (pl_conn_find(f, need, &c->pilot, errp) < 0)
        goto error;
    if (c->pilot.state == PL_PILOT_RUNNING) {
        if (connect_rpc(c, errp) < 0)
            goto error;
        return c;
    }
    if (need == PL_CONN_WRITE) {
        not_running(&c->pilot, errp);
        goto error;
    }
    if (need == PL_CONN_READ && open_db(c, errp) < 0)
        goto error;
    return c;
error:
    pl_conn_free(c);
    return NULL;
}

struct pl_conn *pl_conn_attach(struct pl_find *f, const struct pl_pilot *p,
                               struct pl_error *errp)
{
    struct pl_conn *c;

    if (!(c = conn_new(f, errp)))
        return NULL;
    c->pilot = *p;
    if (connect_rpc(c, errp) < 0) {
        pl_conn_free(c);
        return NULL;
    }
    return c;
}

void pl_conn_free(struct pl_conn *c)
{
    if (!c)
        return;
    int saved = errno;
    pl_rpc_free(c->rpc);
    sqlite3_close(c->db);
    free(c);
    errno = saved;
}

bool pl_conn_recheck(struct pl_conn *c)
{
    struct pl_error err;

    if (!c->rpc)
        return false;
    pl_pilot_probe(c->find, &c->pilot);
    if (c->pilot.state == PL_PILOT_RUNNING)
        return false;
    pl_rpc_free(c->rpc);
    c->rpc = NULL;
    if (open_db(c, &err) < 0)
        pl_find_note(c->find, "%s", err.text); /* requests say it's down */
    return true;
}

bool pl_conn_moved(struct pl_conn *c)
{
    struct pl_error err;
    struct pl_rpc *old = c->rpc;

    if (!old || c->pilot.state != PL_PILOT_RUNNING || !c->pilot.has_ep
        || !strcmp(c->pilot.ep.client, c->ep))
        return false;
    if (connect_rpc(c, &err) < 0) {
        c->rpc = old; /* asked again at the next failure */
        return false;
    }
    pl_rpc_free(old);
    return true;
}

/* The number to build the next request with, or 0 with errp set
 * (ENOTCONN) when pilotd is not connected. */
uint64_t conn_seq(struct pl_conn *c, struct pl_error *errp)
{
    if (!c->rpc) {
        not_running(&c->pilot, errp);
        return 0;
    }
    return pl_rpc_seq(c->rpc);
}

/* Send the request built in 'w' (which this destroys) and return the
 * reply data as a new JSON value; 'what' names the request when the
 * data is not of type 'want' (-1: any). */
json_t *conn_call(struct pl_conn *c, struct pl_wbuf *w, int want,
                  const char *what, struct pl_error *errp)
{
    struct pl_msg reply;
    const msgpack_object *data;
    json_t *out;
    int rc = pl_rpc_call(c->rpc, w, c->timeout_ms, &reply, &data, errp);

    pl_wbuf_destroy(w);
    if (rc < 0)
        return NULL;
    if (!(out = pl_mpjson_to_json(data)))
        pl_errprintf(errp, "pilotd sent a reply that is not valid JSON data");
    pl_msg_release(&reply);
    if (out && want >= 0 && json_typeof(out) != (json_type)want) {
        json_decref(out);
        errno = EPROTO;
        pl_errprintf(errp, "pilotd answered %s with something else than %s",
                     what, want == JSON_ARRAY ? "an array" : "an object");
        return NULL;
    }
    return out;
}

/* A selection resolved on the database (the pilot is down), as pilotd
 * does it.  0, or -1 with errp set. */
static int db_resolve(struct pl_conn *c, const struct pl_sel_req *sel,
                      bool expand, uint64_t **ids, size_t *n,
                      struct pl_error *errp)
{
    if (!sel) {
        *ids = NULL;
        *n = 0;
        return 0;
    }
    return pl_query_resolve(c->db, sel->ids, sel->nids, sel->elems,
                            sel->nelems, expand, ids, n, errp);
}

json_t *pl_conn_list(struct pl_conn *c, const char *state,
                     const char *const *tags, const struct pl_sel_req *sel,
                     uint64_t limit, struct pl_error *errp)
{
    /* borrowed: the encoder only reads them */
    struct pl_list_req l = { .state = (char *)state, .tags = (char **)tags,
                             .limit = limit };
    struct pl_wbuf w;
    uint64_t seq;
    json_t *out;

    if (c->db) {
        uint64_t *ids;
        size_t n;
        if (db_resolve(c, sel, true, &ids, &n, errp) < 0)
            return NULL;
        out = sel && pl_sel_req_given(sel) && n == 0
                  ? json_array()
                  : pl_query_tasks(c->db, state, tags, ids, n, limit, errp);
        free(ids);
        return out;
    }
    /* pilotd answers a page of PL_LIST_PAGE at most: the next is asked
     * for after the last task of the one before */
    if (!(out = json_array())) {
        errno = ENOMEM;
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    if (sel)
        l.sel = *sel;
    for (;;) {
        uint64_t want = limit ? limit - json_array_size(out) : PL_LIST_PAGE;
        json_t *page, *last;
        l.limit = want < PL_LIST_PAGE ? want : PL_LIST_PAGE;
        if (!(seq = conn_seq(c, errp)))
            goto error;
        pl_list_req_encode(&w, seq, &l);
        if (!(page = conn_call(c, &w, JSON_ARRAY, "list", errp)))
            goto error;
        size_t got = json_array_size(page);
        last = got ? json_object_get(json_array_get(page, got - 1), "id")
                   : NULL;
        json_array_extend(out, page);
        json_decref(page);
        if (got < l.limit || (limit && json_array_size(out) >= limit))
            return out;
        if (!json_is_integer(last) || json_integer_value(last) <= 0) {
            errno = EPROTO;
            pl_errprintf(errp, "pilotd answered list with a task without "
                         "an id");
            goto error;
        }
        l.after = (uint64_t)json_integer_value(last);
    }
error:
    json_decref(out);
    return NULL;
}

json_t *pl_conn_timeline(struct pl_conn *c, const struct pl_tl_req *q,
                         struct pl_error *errp)
{
    struct pl_wbuf w;
    uint64_t seq;

    if (c->db) {
        uint64_t *ids;
        size_t n;
        json_t *out;
        if (db_resolve(c, &q->sel, true, &ids, &n, errp) < 0)
            return NULL;
        out = pl_query_timeline(c->db, q, ids, n, errp);
        free(ids);
        return out;
    }
    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_tl_req_encode(&w, seq, q);
    return conn_call(c, &w, JSON_OBJECT, "timeline", errp);
}

json_t *pl_conn_show(struct pl_conn *c, const struct pl_sel_req *one,
                     struct pl_error *errp)
{
    struct pl_show_req r = { .id = one->nids ? one->ids[0] : one->elems[0] };
    struct pl_wbuf w;
    uint64_t seq;
    json_t *out;

    if (c->db) {
        uint64_t *ids;
        size_t n;
        if (db_resolve(c, one, true, &ids, &n, errp) < 0)
            return NULL;
        out = pl_query_task(c->db, n ? ids[0] : 0, errp);
        free(ids);
        return out;
    }
    if (!(seq = conn_seq(c, errp)))
        return NULL;
    if (!one->nids) {
        r.by_elem = true;
        r.index = one->elems[1];
    }
    pl_show_req_encode(&w, seq, &r);
    return conn_call(c, &w, JSON_OBJECT, "show", errp);
}

json_t *pl_conn_counts(struct pl_conn *c, const struct pl_sel_req *sel,
                       struct pl_error *errp)
{
    static const struct pl_sel_req all = { 0 };
    struct pl_wbuf w;
    uint64_t seq;
    json_t *out;

    if (c->db) {
        /* arrays stay ids: pl_query_counts counts them in one query */
        uint64_t *ids;
        size_t n;
        if (db_resolve(c, sel, false, &ids, &n, errp) < 0)
            return NULL;
        out = pl_query_counts(c->db, ids, n, errp);
        free(ids);
        return out;
    }
    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_sel_req_encode(&w, PL_MSG_COUNTS, seq, sel ? sel : &all);
    return conn_call(c, &w, JSON_OBJECT, "counts", errp);
}

json_t *pl_conn_results(struct pl_conn *c, const uint64_t *ids,
                        uint32_t n, struct pl_error *errp)
{
    struct pl_results_req r = { .ids = (uint64_t *)ids, .nids = n };
    struct pl_wbuf w;
    uint64_t seq;

    if (c->db)
        return pl_query_results(c->db, ids, n, PL_RESULTS_REPLY_MAX, errp);
    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_results_req_encode(&w, seq, &r);
    return conn_call(c, &w, JSON_ARRAY, "results", errp);
}

/* Integer 'key' of 'obj', or 0. */
static json_int_t jint(const json_t *obj, const char *key)
{
    return json_integer_value(json_object_get(obj, key));
}

/* Per node: running tasks and the cores and GPUs they hold, as the
 * database last recorded them. */
static int add_busy(sqlite3 *db, json_t *nodes, struct pl_error *errp)
{
    static const char *busy_states[] = { "assigned", "running" };
    json_t *n;
    size_t i;

    json_array_foreach(nodes, i, n) {
        json_object_set_new(n, "cores_busy", json_integer(0));
        json_object_set_new(n, "gpus_busy", json_integer(0));
        json_object_set_new(n, "running", json_integer(0));
        json_object_set_new(n, "tasks", json_array());
        json_object_set_new(n, "tasks_more", json_integer(0));
    }
    for (size_t s = 0; s < 2; s++) {
        json_t *tasks = pl_query_tasks(db, busy_states[s], NULL, NULL, 0, 0,
                                       errp);
        json_t *t;
        size_t j;
        if (!tasks)
            return -1;
        json_array_foreach(tasks, j, t) {
            const char *node = json_string_value(json_object_get(t, "node"));
            if (!node)
                continue;
            json_array_foreach(nodes, i, n) {
                const char *name = json_string_value(json_object_get(n,
                                                                     "name"));
                if (!name || strcmp(name, node))
                    continue;
                json_int_t c = jint(n, "cores_busy");
                json_int_t g = jint(n, "gpus_busy");
                json_int_t r = jint(n, "running");
                c += (json_int_t)json_array_size(json_object_get(t, "cores"));
                g += (json_int_t)json_array_size(json_object_get(t, "gpus"));
                json_object_set_new(n, "cores_busy", json_integer(c));
                json_object_set_new(n, "gpus_busy", json_integer(g));
                json_object_set_new(n, "running", json_integer(r + 1));
                /* the first few by name, as pilotd's status lists them */
                json_t *tl = json_object_get(n, "tasks");
                if (json_array_size(tl) < 10) {
                    json_t *argv = json_object_get(t, "argv");
                    json_array_append_new(tl, json_pack(
                        "{s:O?, s:O?, s:O?}", "id", json_object_get(t, "id"),
                        "name", json_object_get(t, "name"), "cmd",
                        json_array_get(argv, 0)));
                }
                else
                    json_object_set_new(n, "tasks_more",
                                        json_integer(jint(n, "tasks_more")
                                                     + 1));
                break;
            }
        }
        json_decref(tasks);
    }
    return 0;
}

/* The status object built from the database, for a pilot that does not
 * answer. */
static json_t *db_status(struct pl_conn *c, struct pl_error *errp)
{
    const struct pl_pilot *p = &c->pilot;
    json_t *st = NULL, *nodes = NULL, *counts = NULL, *n;
    json_int_t cores = 0, cores_busy = 0, gpus = 0, gpus_busy = 0;
    long job = p->info.job ? p->info.job : p->ep.job;
    size_t i;

    if (!(nodes = pl_query_nodes(c->db, errp))
        || !(counts = pl_query_counts(c->db, NULL, 0, errp))
        || add_busy(c->db, nodes, errp) < 0)
        goto error;
    json_array_foreach(nodes, i, n) {
        /* the node table keeps CPU and GPU ids; the status object counts */
        json_int_t nc = (json_int_t)json_array_size(json_object_get(n,
                                                                    "cores"));
        json_int_t ng = (json_int_t)json_array_size(json_object_get(n,
                                                                    "gpus"));
        json_object_set_new(n, "cores", json_integer(nc));
        json_object_set_new(n, "gpus", json_integer(ng));
        json_object_del(n, "joined");
        cores += nc;
        gpus += ng;
        cores_busy += json_integer_value(json_object_get(n, "cores_busy"));
        gpus_busy += json_integer_value(json_object_get(n, "gpus_busy"));
    }
    const char *host = p->has_ep && p->ep.host[0] ? p->ep.host
                       : p->has_job && p->job.host[0] ? p->job.host
                                                      : NULL;
    st = json_pack("{s:s, s:s, s:I, s:s?, s:f, s:o, s:n, s:I, s:O, "
                   "s:{s:I, s:I}, s:{s:I, s:I}, s:O, s:s}",
                   "pilot", p->id, "mode", p->info.mode,
                   "job", (json_int_t)job, "host", host,
                   "started", p->info.created,
                   "end_time", p->has_job && p->job.end_time
                                   ? json_real((double)p->job.end_time)
                                   : json_null(),
                   "walltime_left", "agents_expected",
                   (json_int_t)(p->info.nodes ? p->info.nodes : 1),
                   "nodes", nodes,
                   "cores", "busy", cores_busy, "total", cores,
                   "gpus", "busy", gpus_busy, "total", gpus,
                   "tasks", counts,
                   "state", pl_pilot_state_name(p->state));
    if (!st)
        nomem(errp);
error:
    json_decref(nodes);
    json_decref(counts);
    return st;
}

json_t *pl_conn_status(struct pl_conn *c, struct pl_error *errp)
{
    struct pl_wbuf w;
    uint64_t seq;

    if (c->db)
        return db_status(c, errp);
    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_wbuf_init(&w, PL_MSG_STATUS, seq);
    return conn_call(c, &w, JSON_OBJECT, "status", errp);
}
