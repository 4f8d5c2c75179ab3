/* agent/vetcheck_nccl.c - pilot-vetcheck nccl: NCCL all-reduce across
 * the ranks of an MPI job, one GPU a rank: checked, then its bus
 * bandwidth as nccl-tests define it
 *
 * NCCL and the CUDA runtime are the worker's (worker/nccl.c): loaded
 * with dlopen(), the communicator made from rank 0's ncclUniqueId sent
 * by MPI_Bcast.  The few other calls are declared here from nccl.h and
 * cuda_runtime_api.h (cudaError_t, ncclResult_t and the enums are ints,
 * the handles pointers).
 *
 * busbw: an all-reduce of S bytes over n ranks in time t has algbw S/t;
 * a ring moves 2(n-1)/n x S through each rank's link, so busbw = algbw x
 * 2(n-1)/n, which can be set against the link's own speed whatever n is
 * (nccl-tests, doc/PERFORMANCE.md).  With one rank it is 0.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef PL_VET_NO_MPI
#include <mpi.h>
#endif

#include "agent/vetcheck.h"
#include "worker/nccl.h"

#define NCCL_FLOAT32 7 /* ncclFloat32 */
#define NCCL_SUM 0     /* ncclSum */
#define H2D 1          /* cudaMemcpyHostToDevice */
#define D2H 2          /* cudaMemcpyDeviceToHost */
#define WARMUP 5
#define WHY 256
#define HOST 256

/* The few collectives the check needs, over MPI_COMM_WORLD; built
 * without MPI (PL_VET_NO_MPI), those of a job of one rank, which makes
 * its communicator with ncclCommInitAll() instead. */
#ifndef PL_VET_NO_MPI
static void start(int *me, int *n, int *local)
{
    MPI_Comm node;

    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, me);
    MPI_Comm_size(MPI_COMM_WORLD, n);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                        MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, local);
    MPI_Comm_free(&node);
}

static int min_int(int x)
{
    int min;

    MPI_Allreduce(&x, &min, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return min;
}

/* rank 0's 'all' gets every rank's 'len' bytes of 'mine' */
static void gather(const void *mine, int len, void *all)
{
    MPI_Gather(mine, len, MPI_CHAR, all, len, MPI_CHAR, 0, MPI_COMM_WORLD);
}

static double max_double(double x)
{
    double max = x;

    MPI_Reduce(&x, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return max;
}

static long sum_long(long x)
{
    long sum = x;

    MPI_Reduce(&x, &sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    return sum;
}

static void bcast_int(int *x)
{
    MPI_Bcast(x, 1, MPI_INT, 0, MPI_COMM_WORLD);
}

static void barrier(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
}

static double wtime(void)
{
    return MPI_Wtime();
}

static void finish(void)
{
    MPI_Finalize();
}

/* every rank voted 1 (ready, no communicator yet) */
static void *comm_new(struct pl_nccl *nc, int *group, int n, int dev,
                      const char **why)
{
    (void)dev;
    return pl_nccl_get(nc, MPI_COMM_WORLD, group, n, 1, why);
}
#else
static void start(int *me, int *n, int *local)
{
    *me = *local = 0;
    *n = 1;
}

static int min_int(int x)
{
    return x;
}

static void gather(const void *mine, int len, void *all)
{
    if (all)
        memcpy(all, mine, (size_t)len);
}

static double max_double(double x)
{
    return x;
}

static long sum_long(long x)
{
    return x;
}

static void bcast_int(int *x)
{
    (void)x;
}

static void barrier(void)
{
}

static double wtime(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void finish(void)
{
}

static void *comm_new(struct pl_nccl *nc, int *group, int n, int dev,
                      const char **why)
{
    int (*init_all)(void **comms, int ndev, const int *devs);
    const char *(*error)(int rc);
    void *p = pl_nccl_sym(nc, "ncclCommInitAll"), *comm = NULL;
    static char text[WHY];
    int rc;

    (void)group;
    (void)n;
    memcpy(&init_all, &p, sizeof(p));
    p = pl_nccl_sym(nc, "ncclGetErrorString");
    memcpy(&error, &p, sizeof(p));
    if (!init_all || !error) {
        *why = "NCCL lacks ncclCommInitAll";
        return NULL;
    }
    if ((rc = init_all(&comm, 1, &dev)) != 0) {
        snprintf(text, sizeof(text), "ncclCommInitAll: %s", error(rc));
        *why = text;
        return NULL;
    }
    return comm;
}
#endif

struct opts {
    double size; /* bytes, a multiple of 4 */
    int iters;
    double min_busbw; /* GB/s; 0: none */
};

struct rt {
    int (*all_reduce)(const void *send, void *recv, size_t count, int type,
                      int op, void *comm, void *stream);
    const char *(*nccl_error)(int rc);
    int (*device_count)(int *n);
    int (*malloc)(void **p, size_t bytes);
    int (*free)(void *p);
    int (*memcpy)(void *dst, const void *src, size_t bytes, int kind);
    int (*stream_create)(void **s);
    int (*stream_sync)(void *s);
    int (*stream_destroy)(void *s);
    const char *(*cuda_error)(int rc);
};

static int get(const struct pl_nccl *nc, const char *name, void *fnp)
{
    void *p = pl_nccl_sym(nc, name);

    memcpy(fnp, &p, sizeof(p));
    return p ? 0 : -1;
}

/* This rank's setup: the calls, its GPU (local rank mod the GPUs it
 * sees).  0, or -1 with 'why'. */
static int setup(struct pl_nccl *nc, struct rt *rt, int local, int *dev,
                 char *why)
{
    int count = 0;

    if (!nc) {
        snprintf(why, WHY, "out of memory");
        return -1;
    }
    if (pl_nccl_error(nc)) {
        snprintf(why, WHY, "%s", pl_nccl_error(nc));
        return -1;
    }
    if (get(nc, "ncclAllReduce", &rt->all_reduce) < 0
        || get(nc, "ncclGetErrorString", &rt->nccl_error) < 0
        || get(nc, "cudaGetDeviceCount", &rt->device_count) < 0
        || get(nc, "cudaMalloc", &rt->malloc) < 0
        || get(nc, "cudaFree", &rt->free) < 0
        || get(nc, "cudaMemcpy", &rt->memcpy) < 0
        || get(nc, "cudaStreamCreate", &rt->stream_create) < 0
        || get(nc, "cudaStreamSynchronize", &rt->stream_sync) < 0
        || get(nc, "cudaStreamDestroy", &rt->stream_destroy) < 0
        || get(nc, "cudaGetErrorString", &rt->cuda_error) < 0) {
        snprintf(why, WHY, "NCCL or the CUDA runtime lacks a function");
        return -1;
    }
    rt->device_count(&count);
    *dev = count > 0 ? local % count : 0;
    if (pl_nccl_set_device(nc, *dev) < 0) {
        snprintf(why, WHY, "%s", pl_nccl_error(nc));
        return -1;
    }
    return 0;
}

/* Every rank's 'ok' and, where not, its why: rank 0 gets the first that
 * failed into 'first' ("rank 3 on n4: ...").  Collective.  Returns the
 * MPI_MIN of ok. */
static int agree(int ok, const char *why, int me, int n, const char *names,
                 char *first, size_t len)
{
    char *all = NULL;

    if (min_int(ok))
        return 1;
    if (me == 0 && !(all = calloc((size_t)n, WHY)))
        snprintf(first, len, "rank 0: out of memory");
    gather(why, WHY, all);
    for (int r = 0; me == 0 && all && r < n; r++)
        if (all[r * WHY]) {
            snprintf(first, len, "rank %d on %s: %.*s", r, names + r * HOST,
                     WHY - 1, all + r * WHY);
            break;
        }
    free(all);
    return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        { "size", required_argument, NULL, 's' },
        { "iters", required_argument, NULL, 'i' },
        { "min-busbw-gbs", required_argument, NULL, 'b' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    double x;
    int c;

    *o = (struct opts){ .size = 64 << 20, .iters = 20 };
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", longs, NULL)) != -1) {
        switch (c) {
        case 's':
            if (pl_vet_number("--size", optarg, 4, 16.0 * (1 << 30), 1,
                              &o->size) < 0)
                return -1;
            o->size = floor(o->size / 4) * 4; /* whole floats */
            break;
        case 'i':
            if (pl_vet_number("--iters", optarg, 1, 1e6, 0, &x) < 0)
                return -1;
            o->iters = (int)x;
            break;
        case 'b':
            if (pl_vet_number("--min-busbw-gbs", optarg, 0, 1e6, 0,
                              &o->min_busbw) < 0)
                return -1;
            break;
        case 'h':
            pl_vet_usage(stdout, "nccl");
            exit(PL_VET_PASS);
        default:
            fprintf(stderr, "pilot-vetcheck: nccl: bad option '%s'\n",
                    argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "pilot-vetcheck: nccl: unexpected '%s'\n",
                argv[optind]);
        return -1;
    }
    return 0;
}

/* The all-reduce: once, checked on every element, then timed.  *secs
 * gets the mean time of one; 'why' what went wrong.  0, or -1. */
static int run(const struct rt *rt, void *comm, const struct opts *o, int me,
               int n, double *secs, long *wrong, char *why)
{
    size_t count = (size_t)o->size / 4, bytes = count * 4;
    float *host = malloc(bytes);
    void *send = NULL, *recv = NULL, *stream = NULL;
    const char *step = "malloc";
    int rc = 0, nrc = 0;
    double t0;

    *wrong = 0;
    if (!host)
        goto error;
    /* rank r gives r+1 + i%8: the sum is n(n+1)/2 + n(i%8), exact in a
     * float for any n a job has */
    for (size_t i = 0; i < count; i++)
        host[i] = (float)(me + 1) + (float)(i % 8);
    step = "cudaMalloc";
    if ((rc = rt->malloc(&send, bytes)) != 0
        || (rc = rt->malloc(&recv, bytes)) != 0)
        goto error;
    step = "cudaStreamCreate";
    if ((rc = rt->stream_create(&stream)) != 0)
        goto error;
    step = "cudaMemcpy";
    if ((rc = rt->memcpy(send, host, bytes, H2D)) != 0)
        goto error;
    step = "ncclAllReduce";
    if ((nrc = rt->all_reduce(send, recv, count, NCCL_FLOAT32, NCCL_SUM,
                              comm, stream)) != 0)
        goto error;
    step = "cudaStreamSynchronize";
    if ((rc = rt->stream_sync(stream)) != 0)
        goto error;
    step = "cudaMemcpy";
    memset(host, 0, bytes);
    if ((rc = rt->memcpy(host, recv, bytes, D2H)) != 0)
        goto error;
    for (size_t i = 0; i < count; i++)
        if (host[i] != (float)(n * (n + 1) / 2) + (float)n * (float)(i % 8))
            ++*wrong;
    step = "ncclAllReduce";
    for (int i = 0; i < WARMUP && nrc == 0; i++)
        nrc = rt->all_reduce(send, recv, count, NCCL_FLOAT32, NCCL_SUM,
                             comm, stream);
    if (nrc != 0 || (rc = rt->stream_sync(stream)) != 0)
        goto error;
    barrier();
    t0 = wtime();
    for (int i = 0; i < o->iters && nrc == 0; i++)
        nrc = rt->all_reduce(send, recv, count, NCCL_FLOAT32, NCCL_SUM,
                             comm, stream);
    if (nrc != 0 || (rc = rt->stream_sync(stream)) != 0)
        goto error;
    *secs = (wtime() - t0) / o->iters;
    rt->free(send);
    rt->free(recv);
    rt->stream_destroy(stream);
    free(host);
    return 0;
error:
    snprintf(why, WHY, "%s: %s", step,
             nrc   ? rt->nccl_error(nrc)
             : rc  ? rt->cuda_error(rc)
                   : "out of memory");
    if (send)
        rt->free(send);
    if (recv)
        rt->free(recv);
    if (stream)
        rt->stream_destroy(stream);
    free(host);
    return -1;
}

/* Rank 0: the figures and the thresholds on them. */
static void result(struct pl_vet *v, const struct opts *o, int n,
                   const char *names, double secs, long wrong)
{
    double alg = o->size / secs / 1e9, bus = alg * 2 * (n - 1) / n;
    json_t *nodes = json_array();

    for (int r = 0; r < n; r++)
        json_array_append_new(nodes, json_string(names + r * HOST));
    json_object_set_new(v->out, "nodes", nodes);
    json_object_set_new(v->out, "wrong", json_integer(wrong));
    json_object_set_new(v->out, "time_us", json_real(secs * 1e6));
    json_object_set_new(v->out, "algbw_gbs", json_real(alg));
    json_object_set_new(v->out, "busbw_gbs", json_real(bus));
    if (wrong)
        pl_vet_fail(v, "nccl.wrong", (double)wrong, 0,
                    json_pack("{sO}", "nodes", nodes),
                    "%ld elements of the all-reduce were wrong", wrong);
    if (n == 1 && o->min_busbw > 0)
        json_object_set_new(v->out, "note",
                            json_string("one rank: its bus bandwidth is 0 "
                                        "by definition, the threshold is "
                                        "not applied"));
    else if (bus < o->min_busbw)
        pl_vet_fail(v, "nccl.busbw", bus, o->min_busbw,
                    json_pack("{sO}", "nodes", nodes),
                    "all-reduce of %.0f bytes over %d ranks: bus bandwidth "
                    "%.2f GB/s, under %g GB/s", o->size, n, bus,
                    o->min_busbw);
}

int pl_vet_nccl(int argc, char **argv)
{
    char name[HOST] = "", *names = NULL;
    char why[WHY] = "", first[WHY + HOST + 32] = "";
    struct pl_nccl *nc = NULL;
    struct pl_vet v = { 0 };
    struct rt rt;
    struct opts o;
    int me, n, local, dev = -1, *group = NULL;
    int rc = PL_VET_CANNOT, ok;
    double secs = 0, slowest;
    long wrong = 0, wrong_all;
    void *comm;
    const char *cwhy = NULL;

    if (parse(argc, argv, &o) < 0) {
        pl_vet_usage(stderr, "nccl");
        return PL_VET_USAGE;
    }
    start(&me, &n, &local);
    if (gethostname(name, sizeof(name) - 1) < 0)
        snprintf(name, sizeof(name), "?");
    ok = (group = malloc((size_t)n * sizeof(int))) != NULL;
    if (me == 0)
        ok = ok && (names = calloc((size_t)n, HOST))
             && pl_vet_init(&v, "nccl") == 0;
    if (!min_int(ok)) {
        if (me == 0)
            fprintf(stderr, "pilot-vetcheck: nccl: out of memory\n");
        goto out;
    }
    gather(name, HOST, names);
    memset(&rt, 0, sizeof(rt));
    nc = pl_nccl_open();
    ok = setup(nc, &rt, local, &dev, why) == 0;
    if (me == 0) {
        json_object_set_new(v.out, "ranks", json_integer(n));
        json_object_set_new(v.out, "size", json_integer((json_int_t)o.size));
        json_object_set_new(v.out, "iters", json_integer(o.iters));
        json_object_set_new(v.out, "limits", json_pack("{sf}",
                                                       "min_busbw_gbs",
                                                       o.min_busbw));
        if (nc && pl_nccl_about(nc)[0])
            json_object_set_new(v.out, "nccl",
                                json_string(pl_nccl_about(nc)));
    }
    if (!agree(ok, why, me, n, names, first, sizeof(first))) {
        if (me == 0)
            pl_vet_cannot(&v, "no GPU for NCCL: %s", first);
        goto out;
    }
    for (int r = 0; r < n; r++)
        group[r] = r;
    if (!(comm = comm_new(nc, group, n, dev, &cwhy))) {
        if (me == 0)
            pl_vet_fail(&v, "nccl.init", NAN, NAN, NULL, "%s", cwhy);
        goto out;
    }
    ok = run(&rt, comm, &o, me, n, &secs, &wrong, why) == 0;
    if (!agree(ok, why, me, n, names, first, sizeof(first))) {
        if (me == 0)
            pl_vet_fail(&v, "nccl.allreduce", NAN, NAN, NULL, "%s", first);
        goto out;
    }
    /* the slowest rank's time is the collective's */
    slowest = max_double(secs);
    wrong_all = sum_long(wrong);
    if (me == 0)
        result(&v, &o, n, names, slowest, wrong_all);
out:
    if (me == 0 && v.out)
        rc = pl_vet_end(&v);
    bcast_int(&rc);
    /* the communicator is left to the process's end, as the worker does
     * (worker/nccl.h) */
    pl_nccl_free(nc);
    finish();
    free(group);
    free(names);
    return rc;
}
