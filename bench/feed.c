/* bench/feed.c - submit N copies of a command in a few big requests
 *
 * The benchmark's own feeder, for when the work must be queued faster
 * than one 'pilot submit' per task: it talks to pilotd as the CLI does
 * (proto/rpc.c, the client keys of the pilot directory) and sends submit
 * requests of CHUNK task specs each (docs/protocol.md, 101 submit).  "{}"
 * in the arguments becomes the task's index (0 to N-1).  Prints one JSON
 * line: {"n", "chunk", "seconds", "first_id", "last_id"}; "seconds" runs
 * from the first request to the last reply (every task acknowledged:
 * pilotd replies after its commit).
 *
 * With -l (latency), the N tasks go one at a time over one connection,
 * opened by a first request that is not timed: submit one, ask for it (list) every -i microseconds until it has ended,
 * then the next.  Prints {"n", "interval_us", "ack", "start", "report",
 * "queue"}: per task, seconds from the submit request to its reply, to
 * the task's start_time, from its end_time to the list that showed it
 * ended (late by up to one interval), and pilotd's own start_time -
 * submit_time.  Same host, same clock: a local pilot.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proto/clientmsg.h"
#include "proto/error.h"
#include "proto/keys.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/poolmsg.h"
#include "proto/rpc.h"
#include "proto/spec.h"
#include "proto/strv.h"

static const char usage[] =
    "Usage: feed [-c CHUNK] [-t SECONDS] DIR N [--] CMD [ARGS]\n"
    "       feed -l [-i US] DIR N [--] CMD [ARGS]\n"
    "       feed -a ID DIR N [--] CMD [ARGS]\n"
    "       feed -l -p POOL [-r RANKS] [-N NODES] DIR N [--] LIB.so:SYM "
    "[ARGS]\n"
    "Submit N tasks running CMD to the pilot whose directory is DIR,\n"
    "CHUNK (default 5000, pilotd's most; at most 100000, for tests of\n"
    "that limit) per request; {} in ARGS is\n"
    "the task's index.  -t: each request's timeout (default 120).\n"
    "-l: one at a time, each after the last ended (polled every US\n"
    "microseconds, default 1000); print their latencies.\n"
    "-a: one request of one array spec, indexes 0 to N-1, appended to\n"
    "array ID (0: a new array); for the tests of pilotd's limits.\n"
    "-p: pool tasks of a C function in pool POOL, of RANKS ranks (default\n"
    "1) on NODES nodes (default: as the pool places them).\n";

static long parse_count(const char *s, const char *what, long max)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > max) {
        fprintf(stderr, "feed: %s: want 1 to %ld\n", what, max);
        exit(2);
    }
    return v;
}

#define FILLED_MAX 4096 /* bytes of an argument with its "{}" filled in */

/* The task's command: CMD [ARGS] with each "{}" replaced by its index.
 * 'argv' points into 'args' (what main() got) and into 'holes' (FILLED_MAX
 * bytes for each argument, used by those with a "{}"). */
struct command {
    char **args;
    int argc;
    char **argv;   /* argc + 1 */
    char *holes;
};

static void fill_arg(struct command *c, int k, long index)
{
    char *buf = c->holes + (size_t)k * FILLED_MAX;
    size_t len = 0;
    const char *s = c->args[k];
    const char *hole;

    while ((hole = strstr(s, "{}")) && len < FILLED_MAX) {
        len += (size_t)snprintf(buf + len, FILLED_MAX - len, "%.*s%ld",
                                (int)(hole - s), s, index);
        s = hole + 2;
    }
    if (len < FILLED_MAX)
        snprintf(buf + len, FILLED_MAX - len, "%s", s);
    c->argv[k] = buf;
}

/* Submit tasks 'from' to 'from' + 'n' - 1; their ids go to *first and
 * *last.  Returns 0, or -1 with errp set. */
/* -a: 'n' tasks as one array spec; else 'n' specs, tasks 'from' on. */
static long append_to = -1;
/* -p, -r, -N: pool tasks */
static const char *pool;
static long pool_ranks = 1, pool_nodes;

static int submit(struct pl_rpc *r, struct command *c, long from, long n,
                  int timeout_ms, uint64_t *first, uint64_t *last,
                  struct pl_error *errp)
{
    /* N.B. its pointers are borrowed: never pl_spec_clear()ed */
    struct pl_spec s;
    struct pl_wbuf w;
    struct pl_msg reply;
    const msgpack_object *data, *ids;
    int rc = -1;

    pl_spec_init(&s);
    s.argv = c->argv;
    s.cwd = (char *)"/";
    s.has_ranks = true; /* ranks, cores and GPUs sent, retries left out */
    if (pool) {
        s.pool = (char *)pool;
        s.fn = PL_FN_C;
        s.ranks = (uint64_t)pool_ranks;
        s.nodes = (uint64_t)pool_nodes;
    }
    if (append_to >= 0) {
        s.array = true;
        s.aend = (uint64_t)n - 1;
        s.astep = 1;
        s.append = (uint64_t)append_to;
        pl_submit_begin(&w, pl_rpc_seq(r), 1);
        pl_spec_encode(&w, &s);
    }
    else
        pl_submit_begin(&w, pl_rpc_seq(r), (uint32_t)n);
    for (long i = from; append_to < 0 && i < from + n; i++) {
        for (int k = 0; k < c->argc; k++)
            if (strstr(c->args[k], "{}"))
                fill_arg(c, k, i);
        pl_spec_encode(&w, &s);
    }
    if (pl_rpc_call(r, &w, timeout_ms, &reply, &data, errp) < 0)
        goto error;
    if (data->type != MSGPACK_OBJECT_MAP
        || !(ids = pl_mp_get(data, "ids"))
        || ids->type != MSGPACK_OBJECT_ARRAY
        || ids->via.array.size != (uint32_t)n
        || ids->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER
        || ids->via.array.ptr[n - 1].type
               != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        errno = EPROTO;
        pl_errprintf(errp, "pilotd answered submit without %ld ids", n);
    }
    else {
        *first = ids->via.array.ptr[0].via.u64;
        *last = ids->via.array.ptr[n - 1].via.u64;
        rc = 0;
    }
    pl_msg_release(&reply);
error:
    pl_wbuf_destroy(&w);
    return rc;
}

/* A float field of a task object, or -1 when absent or nil. */
static double task_time(const msgpack_object *task, const char *key)
{
    const msgpack_object *v = pl_mp_get(task, key);

    if (!v)
        return -1;
    if (v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_FLOAT32)
        return v->via.f64;
    if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        return (double)v->via.u64;
    return -1;
}

/* Ask for task 'id' until it has ended; its times go to t[0..2]
 * (submit, start, end), the time of the answer that showed it ended to
 * *seen.  Returns 0, or -1 with errp set. */
static int await_end(struct pl_rpc *r, uint64_t id, long interval_us,
                     int timeout_ms, double t[3], double *seen,
                     struct pl_error *errp)
{
    static const char *const final[] = { "done", "failed", "canceled",
                                         "timeout", NULL };
    struct timespec pause = { .tv_sec = interval_us / 1000000,
                              .tv_nsec = interval_us % 1000000 * 1000 };

    struct pl_list_req list = { .sel = { .ids = &id, .nids = 1 } };

    for (;;) {
        struct pl_wbuf w;
        struct pl_msg reply;
        const msgpack_object *data, *st;
        bool ended = false;

        pl_list_req_encode(&w, pl_rpc_seq(r), &list);
        if (pl_rpc_call(r, &w, timeout_ms, &reply, &data, errp) < 0) {
            pl_wbuf_destroy(&w);
            return -1;
        }
        pl_wbuf_destroy(&w);
        *seen = pl_now();
        if (data->type != MSGPACK_OBJECT_ARRAY || data->via.array.size != 1
            || data->via.array.ptr[0].type != MSGPACK_OBJECT_MAP
            || !(st = pl_mp_get(&data->via.array.ptr[0], "state"))
            || st->type != MSGPACK_OBJECT_STR) {
            pl_msg_release(&reply);
            errno = EPROTO;
            return pl_errprintf(errp, "pilotd answered list of task %llu "
                                "without it", (unsigned long long)id);
        }
        for (int i = 0; final[i] && !ended; i++)
            ended = st->via.str.size == strlen(final[i])
                    && !memcmp(st->via.str.ptr, final[i], st->via.str.size);
        if (ended) {
            t[0] = task_time(&data->via.array.ptr[0], "submit_time");
            t[1] = task_time(&data->via.array.ptr[0], "start_time");
            t[2] = task_time(&data->via.array.ptr[0], "end_time");
        }
        pl_msg_release(&reply);
        if (ended)
            return 0;
        nanosleep(&pause, NULL);
    }
}

static void print_series(const char *key, const double *v, long n)
{
    printf(", \"%s\": [", key);
    for (long i = 0; i < n; i++)
        printf("%s%.6f", i ? ", " : "", v[i]);
    printf("]");
}

/* One request (a pool list) and its reply: zmq_connect() only starts
 * the connection, and the -l clock is for one that is open, its CURVE
 * handshake done.  0, or -1 with errp set. */
static int warm_up(struct pl_rpc *r, int timeout_ms, struct pl_error *errp)
{
    struct pl_pool_req none = { .name = "" };
    struct pl_wbuf w;
    struct pl_msg reply;
    const msgpack_object *data;
    int rc;

    pl_pool_req_encode(&w, PL_MSG_POOL_LIST, pl_rpc_seq(r), &none);
    if ((rc = pl_rpc_call(r, &w, timeout_ms, &reply, &data, errp)) == 0)
        pl_msg_release(&reply);
    pl_wbuf_destroy(&w);
    return rc;
}

/* The -l mode: N tasks one after another. */
static int latency(struct pl_rpc *r, struct command *c, long n,
                   long interval_us, int timeout_ms)
{
    struct pl_error err;
    double *v[6];
    uint64_t id, same;
    double t[3] = { 0 }, seen = 0;

    for (int k = 0; k < 6; k++)
        if (!(v[k] = calloc((size_t)n, sizeof(double)))) {
            fprintf(stderr, "feed: out of memory\n");
            return 1;
        }
    if (warm_up(r, timeout_ms, &err) < 0) {
        fprintf(stderr, "feed: %s\n", err.text);
        return 1;
    }
    for (long i = 0; i < n; i++) {
        double t0 = pl_now();
        v[5][i] = t0;
        if (submit(r, c, i, 1, timeout_ms, &id, &same, &err) < 0
            || (v[0][i] = pl_now() - t0) < 0
            || await_end(r, id, interval_us, timeout_ms, t, &seen, &err)
                   < 0) {
            fprintf(stderr, "feed: task %ld: %s\n", i, err.text);
            return 1;
        }
        v[1][i] = t[1] - t0;
        v[2][i] = seen - t[2];
        v[3][i] = t[1] - t[0];
        v[4][i] = (double)id;
    }
    printf("{\"n\": %ld, \"interval_us\": %ld", n, interval_us);
    print_series("ack", v[0], n);
    print_series("start", v[1], n);
    print_series("report", v[2], n);
    print_series("queue", v[3], n);
    printf(", \"ids\": [");
    for (long i = 0; i < n; i++)
        printf("%s%.0f", i ? ", " : "", v[4][i]);
    printf("]");
    print_series("sent", v[5], n);
    printf("}\n");
    for (int k = 0; k < 6; k++)
        free(v[k]);
    return 0;
}

int main(int argc, char **argv)
{
    struct pl_endpoint ep;
    struct pl_keys_peer keys;
    struct pl_error err;
    struct pl_rpc *r;
    struct command cmd;
    char kdir[4096];
    long chunk = PL_SUBMIT_MAX_TASKS, n;
    long interval_us = 1000;
    int timeout_ms = 120000;
    uint64_t first = 0, last = 0, f, l;
    bool lat = false;
    int c;

    while ((c = getopt(argc, argv, "+a:c:t:i:lp:r:N:h")) != -1) {
        switch (c) {
        case 'a':
            append_to = optarg[0] == '0' && !optarg[1]
                            ? 0 : parse_count(optarg, "-a", LONG_MAX);
            break;
        case 'l':
            lat = true;
            break;
        case 'p':
            if (!pl_pool_name_ok(optarg)) {
                fprintf(stderr, "feed: -p: '%s' is not a pool's name\n",
                        optarg);
                return 2;
            }
            pool = optarg;
            break;
        case 'r':
            pool_ranks = parse_count(optarg, "-r", PL_POOL_MAX_WORKERS);
            break;
        case 'N':
            pool_nodes = parse_count(optarg, "-N", PL_POOL_MAX_WORKERS);
            break;
        case 'i':
            interval_us = parse_count(optarg, "-i", 1000000);
            break;
        case 'c':
            chunk = parse_count(optarg, "-c", PL_SPEC_MAX_SUBMIT);
            break;
        case 't':
            timeout_ms = (int)parse_count(optarg, "-t", 86400) * 1000;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (argc - optind < 3) {
        fputs(usage, stderr);
        return 2;
    }
    const char *dir = argv[optind];
    n = parse_count(argv[optind + 1], "N", 100000000);
    optind += 2;
    if (!strcmp(argv[optind], "--"))
        optind++;
    if (optind >= argc) {
        fputs(usage, stderr);
        return 2;
    }
    cmd.args = argv + optind;
    cmd.argc = argc - optind;
    cmd.argv = calloc((size_t)cmd.argc + 1, sizeof(*cmd.argv));
    cmd.holes = malloc((size_t)cmd.argc * FILLED_MAX);
    if (!cmd.argv || !cmd.holes) {
        fprintf(stderr, "feed: out of memory\n");
        return 1;
    }
    memcpy(cmd.argv, cmd.args, (size_t)cmd.argc * sizeof(*cmd.argv));
    snprintf(kdir, sizeof(kdir), "%s/keys", dir);
    if (pl_endpoint_read(dir, &ep, &err) < 0
        || pl_keys_load_peer(kdir, "client", &keys, &err) < 0
        || !(r = pl_rpc_new(ep.client, &keys, &err))) {
        fprintf(stderr, "feed: %s\n", err.text);
        return 1;
    }
    explicit_bzero(&keys, sizeof(keys));
    if (lat) {
        int rc = latency(r, &cmd, n, interval_us, timeout_ms);
        pl_rpc_free(r);
        free(cmd.argv);
        free(cmd.holes);
        return rc;
    }

    double t0 = pl_mono();
    if (append_to >= 0)
        chunk = n;
    for (long from = 0; from < n; from += chunk) {
        long k = n - from < chunk ? n - from : chunk;
        if (submit(r, &cmd, from, k, timeout_ms, &f, &l, &err) < 0) {
            fprintf(stderr, "feed: submit of tasks %ld-%ld: %s\n", from,
                    from + k - 1, err.text);
            pl_rpc_free(r);
            return 1;
        }
        if (!first)
            first = f;
        last = l;
    }
    double secs = pl_mono() - t0;

    pl_rpc_free(r);
    free(cmd.argv);
    free(cmd.holes);
    printf("{\"n\": %ld, \"chunk\": %ld, \"seconds\": %.6f, "
           "\"first_id\": %llu, \"last_id\": %llu}\n",
           n, chunk, secs, (unsigned long long)first,
           (unsigned long long)last);
    return 0;
}
