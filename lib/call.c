/* lib/call.c - libpilot: pilot_call(), one request by the name of its op
 *
 * Each op reads its arguments from a JSON object, checks them as the
 * CLI checks its options (the same parsers, the same words), sends the
 * request through client/conn.c and answers the reply data as JSON
 * text: what 'pilot ... --json' prints.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/parse.h"
#include "lib/pilot_private.h"
#include "proto/msg.h"
#include "proto/query.h"
#include "proto/state.h"
#include "proto/strv.h"

/* An op's arguments, checked: what its request needs. */
struct args {
    const char *op;
    const char *state;
    const char *tags[PL_QUERY_MAX_TAGS + 1];  /* NULL-terminated */
    char *tagbuf[PL_QUERY_MAX_TAGS];          /* "K=V" made of {K: V} */
    struct pl_sel_req sel;
    bool has_sel;
    uint64_t limit;
    struct pl_pool_req pool;
    char **env;                               /* the pool's, owned */
    uint64_t *rids;                           /* results: its ids */
    uint32_t nrids;
};

static void args_clear(struct args *a)
{
    for (size_t i = 0; i < PL_QUERY_MAX_TAGS; i++)
        free(a->tagbuf[i]);
    pl_sel_req_clear(&a->sel);
    pl_strv_free(a->env);
    free(a->rids);
}

static int bad(const struct args *a, const char *key, const char *want,
               struct pl_error *errp)
{
    return pl_errset(errp, EINVAL, "%s: '%s' must be %s", a->op, key, want);
}

/* Refuse a key of 'args' that is not in 'keys' (NULL-terminated). */
static int known_keys(const struct args *a, const json_t *args,
                      const char *const *keys, struct pl_error *errp)
{
    const char *k;
    json_t *v;

    json_object_foreach((json_t *)args, k, v) {
        size_t i = 0;
        while (keys[i] && strcmp(keys[i], k))
            i++;
        if (!keys[i])
            return pl_errset(errp, EINVAL, "%s: unknown field '%.40s'", a->op,
                             k);
    }
    return 0;
}

/* 'v', a task id or "ID" or "ID.N", as text into buf. */
static int id_text(const json_t *v, char *buf, size_t len)
{
    if (json_is_integer(v) && json_integer_value(v) > 0)
        snprintf(buf, len, "%" PRId64, (int64_t)json_integer_value(v));
    else if (json_is_string(v) && json_string_length(v) < len)
        snprintf(buf, len, "%s", json_string_value(v));
    else
        return -1;
    return 0;
}

/* 'ids' (one id, or an array of them) into a->sel, as the CLI reads
 * its arguments (pl_parse_sel()). */
static int get_sel(struct args *a, const char *key, const json_t *ids,
                   struct pl_error *errp)
{
    size_t n = json_is_array(ids) ? json_array_size(ids) : 1;
    char **argv, *bufs;
    int rc = -1;

    if (n > PL_REQ_MAX_IDS)
        return pl_errset(errp, E2BIG, "%s: more than %d ids at once", a->op,
                         PL_REQ_MAX_IDS);
    argv = calloc(n + 1, sizeof(*argv));
    bufs = calloc(n ? n : 1, 48);
    if (!argv || !bufs) {
        pl_errset(errp, ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        argv[i] = bufs + 48 * i;
        if (id_text(json_is_array(ids) ? json_array_get(ids, i) : ids,
                    argv[i], 48) < 0) {
            bad(a, key, "task ids (ID, or \"ID.N\": element N of array ID)",
                errp);
            goto done;
        }
    }
    if (pl_parse_sel((int)n, argv, &a->sel, errp) < 0)
        goto done;
    a->has_sel = true;
    rc = 0;
done:
    free(argv);
    free(bufs);
    return rc;
}

int pl_lib_sel(const char *what, const json_t *ids, struct pl_sel_req *sel,
               struct pl_error *errp)
{
    struct args a = { .op = what };
    int rc = get_sel(&a, "ids", ids, errp);

    *sel = a.sel; /* empty on failure */
    a.sel = (struct pl_sel_req){ 0 };
    args_clear(&a);
    return rc;
}

/* "KEY=VALUE" (or "KEY": tags of a listing) from [..] or {K: V}, into
 * *out (NULL-terminated, 'max' at most), each passing 'ok'. */
static int get_kv(struct args *a, const char *key, const json_t *v,
                  size_t max, char ***out, struct pl_error *errp)
{
    size_t n = json_is_array(v) ? json_array_size(v) : json_object_size(v);
    const char *k;
    json_t *x;
    size_t i = 0;

    if (!json_is_array(v) && !json_is_object(v))
        return bad(a, key, "a list of \"KEY=VALUE\" or an object", errp);
    if (n > max)
        return pl_errset(errp, EINVAL, "%s: more than %zu %s", a->op, max,
                         key);
    if (!(*out = calloc(n + 1, sizeof(**out))))
        return pl_errset(errp, ENOMEM, "out of memory");
    if (json_is_array(v)) {
        json_array_foreach(v, i, x) {
            if (!json_is_string(x))
                return bad(a, key, "a list of strings", errp);
            if (!((*out)[i] = strdup(json_string_value(x))))
                return pl_errset(errp, ENOMEM, "out of memory");
        }
        return 0;
    }
    json_object_foreach((json_t *)v, k, x) {
        if (!json_is_string(x))
            return bad(a, key, "an object of strings", errp);
        if (asprintf(&(*out)[i++], "%s=%s", k, json_string_value(x)) < 0) {
            (*out)[i - 1] = NULL;
            return pl_errset(errp, ENOMEM, "out of memory");
        }
    }
    return 0;
}

/* The arguments of list: state, tags, ids, limit. */
static int list_args(struct args *a, const json_t *args,
                     struct pl_error *errp)
{
    static const char *const keys[] = { "state", "tags", "ids", "limit",
                                        NULL };
    json_t *v;
    char **tags = NULL;
    int rc = -1;

    if (known_keys(a, args, keys, errp) < 0)
        return -1;
    if ((v = json_object_get(args, "state")) && !json_is_null(v)) {
        if (!json_is_string(v) || pl_state_parse(json_string_value(v)) < 0)
            return bad(a, "state", "a task state (waiting, queued, "
                       "assigned, running, done, failed, canceled, timeout)",
                       errp);
        a->state = json_string_value(v);
    }
    if ((v = json_object_get(args, "limit")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0
            || json_integer_value(v) > UINT32_MAX)
            return bad(a, "limit", "an integer from 0 (all) to 4294967295",
                       errp);
        a->limit = (uint64_t)json_integer_value(v);
    }
    if ((v = json_object_get(args, "ids")) && !json_is_null(v)
        && get_sel(a, "ids", v, errp) < 0)
        return -1;
    if (!(v = json_object_get(args, "tags")) || json_is_null(v))
        return 0;
    if (get_kv(a, "tags", v, PL_QUERY_MAX_TAGS, &tags, errp) < 0)
        goto done;
    for (size_t i = 0; tags[i]; i++) {
        /* as pilot ls --tag: "KEY=VALUE" or "KEY" */
        if (!pl_spec_tag_key(tags[i]) || strlen(tags[i]) > PL_REQ_MAX_TAG) {
            pl_errset(errp, EINVAL, "%s: tag '%.64s' is not KEY=VALUE or KEY "
                      "(KEY: letters, digits, '_', '.', '-')", a->op, tags[i]);
            goto done;
        }
        a->tagbuf[i] = tags[i];
        a->tags[i] = tags[i];
        tags[i] = NULL;
    }
    rc = 0;
done:
    pl_strv_free(tags);
    return rc;
}

/* The arguments of pool_start (name and shape) or pool_stop (name). */
static int pool_args(struct args *a, const json_t *args, bool start,
                     struct pl_error *errp)
{
    static const char *const start_keys[] = {
        "name", "nodes", "ranks_per_node", "cores_per_rank",
        "gpus_per_rank", "launcher", "env", NULL
    };
    static const char *const stop_keys[] = { "name", NULL };
    static const char *const names[] = { "nodes", "ranks_per_node",
                                         "cores_per_rank", "gpus_per_rank" };
    uint64_t *dst[] = { &a->pool.nodes, &a->pool.rpn, &a->pool.cpr,
                        &a->pool.gpr };
    json_t *v = json_object_get(args, "name");

    a->pool = (struct pl_pool_req){ .rpn = 1, .cpr = 1 };
    if (known_keys(a, args, start ? start_keys : stop_keys, errp) < 0)
        return -1;
    if (!json_is_string(v) || !pl_pool_name_ok(json_string_value(v)))
        return bad(a, "name", "a pool's name (1 to 64 of A-Z a-z 0-9 _ . -, "
                   "first a letter or a digit)", errp);
    snprintf(a->pool.name, sizeof(a->pool.name), "%s", json_string_value(v));
    if (!start)
        return 0;
    for (size_t i = 0; i < 4; i++) {
        if (!(v = json_object_get(args, names[i])) || json_is_null(v))
            continue;
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return bad(a, names[i], "a non-negative integer", errp);
        *dst[i] = (uint64_t)json_integer_value(v);
    }
    if ((v = json_object_get(args, "launcher")) && !json_is_null(v)
        && (!json_is_string(v)
            || (a->pool.launcher = pl_launcher_parse(json_string_value(v)))
                   < 0))
        return bad(a, "launcher", "srun or mpirun", errp);
    if ((v = json_object_get(args, "env")) && !json_is_null(v)) {
        if (get_kv(a, "env", v, 256, &a->env, errp) < 0)
            return -1;
        for (size_t i = 0; a->env[i]; i++)
            if (!strchr(a->env[i], '=') || a->env[i][0] == '=')
                return bad(a, "env", "KEY=VALUE entries", errp);
        a->pool.env = a->env;
    }
    return pl_pool_req_check(&a->pool, errp);
}

/* The arguments of results: "ids", 1 to PL_RESULTS_MAX_IDS task ids
 * (integers, or their decimal text), each that task alone. */
static int results_args(struct args *a, const json_t *args,
                        struct pl_error *errp)
{
    static const char *const keys[] = { "ids", NULL };
    json_t *v = json_object_get(args, "ids"), *x;
    size_t i;

    if (known_keys(a, args, keys, errp) < 0)
        return -1;
    if (!json_is_array(v) || json_array_size(v) == 0)
        return bad(a, "ids", "a list of 1 to 1000 task ids", errp);
    if (json_array_size(v) > PL_RESULTS_MAX_IDS)
        return pl_errset(errp, E2BIG, "results: %zu ids; at most %d at once",
                         json_array_size(v), PL_RESULTS_MAX_IDS);
    if (!(a->rids = calloc(json_array_size(v), sizeof(*a->rids))))
        return pl_errset(errp, ENOMEM, "out of memory");
    json_array_foreach(v, i, x) {
        uint64_t id = 0;
        if (json_is_integer(x) && json_integer_value(x) > 0)
            id = (uint64_t)json_integer_value(x);
        else if (!json_is_string(x)
                 || pl_parse_id(json_string_value(x), &id, NULL) < 0)
            return bad(a, "ids", "task ids (positive integers)", errp);
        a->rids[a->nrids++] = id;
    }
    return 0;
}

/* The arguments of 'op' ('args' an object) into 'a': 0, or -1. */
static int get_args(struct args *a, const json_t *args,
                    struct pl_error *errp)
{
    static const char *const none[] = { NULL };
    static const char *const ids[] = { "ids", NULL };
    static const char *const id[] = { "id", NULL };
    const char *op = a->op;
    json_t *v;

    if (!strcmp(op, "list"))
        return list_args(a, args, errp);
    if (!strcmp(op, "show")) {
        if (known_keys(a, args, id, errp) < 0)
            return -1;
        if (!(v = json_object_get(args, "id")) || json_is_array(v))
            return bad(a, "id", "one task id (ID, or \"ID.N\")", errp);
        return get_sel(a, "id", v, errp);
    }
    if (!strcmp(op, "counts") || !strcmp(op, "cancel")) {
        if (known_keys(a, args, ids, errp) < 0)
            return -1;
        v = json_object_get(args, "ids");
        if (v && !json_is_null(v) && get_sel(a, "ids", v, errp) < 0)
            return -1;
        if (!strcmp(op, "cancel") && !pl_sel_req_given(&a->sel))
            return pl_errset(errp, EINVAL, "cancel: no task named (ids)");
        return 0;
    }
    if (!strcmp(op, "pool_start") || !strcmp(op, "pool_stop"))
        return pool_args(a, args, !strcmp(op, "pool_start"), errp);
    if (!strcmp(op, "results"))
        return results_args(a, args, errp);
    if (!strcmp(op, "status") || !strcmp(op, "pool_list")
        || !strcmp(op, "shutdown"))
        return known_keys(a, args, none, errp);
    return pl_errset(errp, EINVAL, "unknown op '%.40s' (list, show, counts, "
                     "status, results, cancel, pool_start, pool_stop, "
                     "pool_list, shutdown)", op);
}

/* Whether 'op' reads what the state database can answer too. */
static bool is_read(const char *op)
{
    return !strcmp(op, "list") || !strcmp(op, "show")
           || !strcmp(op, "counts") || !strcmp(op, "status")
           || !strcmp(op, "results");
}

/* Send op's request; its reply data as a new JSON value, or NULL. */
static json_t *request(struct pl_conn *c, const struct args *a,
                       struct pl_error *errp)
{
    const struct pl_sel_req *sel = a->has_sel ? &a->sel : NULL;
    const char *op = a->op;

    if (!strcmp(op, "list"))
        return pl_conn_list(c, a->state, a->tags[0] ? a->tags : NULL, sel,
                            a->limit, errp);
    if (!strcmp(op, "show"))
        return pl_conn_show(c, &a->sel, errp);
    if (!strcmp(op, "counts"))
        return pl_conn_counts(c, sel, errp);
    if (!strcmp(op, "status"))
        return pl_conn_status(c, errp);
    if (!strcmp(op, "results"))
        return pl_conn_results(c, a->rids, a->nrids, errp);
    if (!strcmp(op, "cancel"))
        return pl_conn_cancel(c, &a->sel, errp);
    if (!strcmp(op, "pool_start"))
        return pl_conn_pool(c, PL_MSG_POOL_START, &a->pool, errp);
    if (!strcmp(op, "pool_stop"))
        return pl_conn_pool(c, PL_MSG_POOL_STOP, &a->pool, errp);
    if (!strcmp(op, "pool_list"))
        return pl_conn_pool(c, PL_MSG_POOL_LIST, NULL, errp);
    /* shutdown */
    return pl_conn_shutdown(c, errp) < 0 ? NULL : json_object();
}

int pilot_call(struct pilot *p, const char *op, const char *args_json,
               char **reply_json, struct pilot_error *err)
{
    struct pl_error e = { { 0 } };
    struct args a = { .op = op };
    json_t *args = NULL, *out = NULL;
    json_error_t jerr;
    int rc = -1;

    if (reply_json)
        *reply_json = NULL;
    if (!p || !op || !reply_json) {
        pl_errset(&e, EINVAL, "pilot_call: a NULL argument");
        return pl_lib_fail(err, &e);
    }
    if (!args_json || !*args_json)
        args = json_object();
    else if (!(args = json_loads(args_json, JSON_REJECT_DUPLICATES, &jerr))) {
        pl_errset(&e, EINVAL, "%.40s: arguments not JSON: %s", op, jerr.text);
        goto done;
    }
    if (!json_is_object(args)) {
        pl_errset(&e, EINVAL, "%.40s: arguments must be a JSON object", op);
        goto done;
    }
    if (get_args(&a, args, &e) < 0)
        goto done;
    pthread_mutex_lock(&p->lock);
    out = request(p->conn, &a, &e);
    /* pilotd gone since: the database answers reads, as for the CLI */
    if (!out && errno == ETIMEDOUT && is_read(op) && pl_lib_recheck(p)
        && p->conn->db)
        out = request(p->conn, &a, &e);
    pthread_mutex_unlock(&p->lock);
    if (!out || pl_lib_dump(out, reply_json, &e) < 0)
        goto done;
    rc = 0;
done:
    if (rc < 0)
        pl_lib_fail(err, &e);
    json_decref(out);
    json_decref(args);
    args_clear(&a);
    return rc;
}
