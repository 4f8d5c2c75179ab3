/* agent/vetcheck_net.c - pilot-vetcheck net: MPI ping-pong latency and
 * bandwidth between every pair of ranks (one rank a node)
 *
 * All pairs, not rank 0 against the others: a bad link between two
 * nodes that are each fine with rank 0 shows only so.  The pairs go in
 * n-1 rounds (n even; one more, with a rank idle each round, when n is
 * odd), each round a perfect matching (the circle method of round-robin
 * tournaments), so a round measures n/2 disjoint pairs at once, as a
 * job's own traffic would load the fabric, and 128 nodes take 127 rounds
 * rather than 8,128 pairs one after the other.
 */
#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/vetcheck.h"

#define TAG 17
#define LAT_BYTES 8

struct opts {
    double size;       /* bytes of the bandwidth messages */
    int iters;         /* latency round trips; bandwidth: iters/5, >= 2 */
    double max_lat_us; /* 0: none */
    double min_bw_mbs; /* 0: none */
};

/* What a round's leader (the lower rank of its pair) measured. */
struct pair {
    double peer; /* the other rank; -1 for a follower or an idle rank */
    double lat_us;
    double bw_mbs;
};

/* 'count' round trips of 'bytes' with 'peer', led by the leader.  The
 * seconds they took. */
static double pingpong(char *buf, int bytes, int count, int peer,
                       int leader)
{
    double t0 = MPI_Wtime();

    for (int i = 0; i < count; i++) {
        if (leader) {
            MPI_Send(buf, bytes, MPI_BYTE, peer, TAG, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, peer, TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, bytes, MPI_BYTE, peer, TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_BYTE, peer, TAG, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

/* This rank's part of one pair: warm up, then time. */
static struct pair measure(char *buf, const struct opts *o, int me,
                           int peer)
{
    int leader = me < peer, bw_iters = o->iters / 5 < 2 ? 2 : o->iters / 5;
    struct pair p = { .peer = leader ? peer : -1 };
    double t;

    pingpong(buf, LAT_BYTES, 10, peer, leader);
    t = pingpong(buf, LAT_BYTES, o->iters, peer, leader);
    p.lat_us = t / (2.0 * o->iters) * 1e6;
    pingpong(buf, (int)o->size, 1, peer, leader);
    t = pingpong(buf, (int)o->size, bw_iters, peer, leader);
    p.bw_mbs = o->size * 2.0 * bw_iters / t / 1e6;
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *x, size_t n)
{
    qsort(x, n, sizeof(*x), cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

/* Rank r's node, in rank 0's gathered names. */
static const char *host(const char *names, int r)
{
    return names + (size_t)r * MPI_MAX_PROCESSOR_NAME;
}

/* Rank 0: the report of 'np' pairs, the thresholds, the slowest. */
static void report(struct pl_vet *v, const struct opts *o, int n,
                   const char *names, const int *a, const int *b,
                   const struct pair *res, int np)
{
    json_t *pairs = json_array(), *nodes = json_array(), *bad = json_array();
    double *lat = calloc((size_t)np, sizeof(double));
    double *bw = calloc((size_t)np, sizeof(double));
    char *failed = calloc((size_t)n, 1);
    int worst_lat = 0, worst_bw = 0;

    if (!pairs || !nodes || !bad || !lat || !bw || !failed) {
        pl_vet_fail(v, "net.report", NAN, NAN, NULL, "out of memory");
        goto out;
    }
    for (int r = 0; r < n; r++)
        json_array_append_new(nodes, json_string(host(names, r)));
    json_object_set(v->out, "nodes", nodes);
    for (int i = 0; i < np; i++) {
        const char *na = host(names, a[i]), *nb = host(names, b[i]);
        json_t *p = json_pack("{sssssisisfsf}", "a", na, "b", nb, "rank_a",
                              a[i], "rank_b", b[i], "latency_us",
                              res[i].lat_us, "bandwidth_mbs", res[i].bw_mbs);
        int ok = 1;

        if (!strcmp(na, nb))
            json_object_set_new(p, "same_node", json_true());
        if (o->max_lat_us > 0 && res[i].lat_us > o->max_lat_us) {
            pl_vet_fail(v, "net.latency", res[i].lat_us, o->max_lat_us,
                        json_pack("{s[ss]}", "nodes", na, nb),
                        "%s <-> %s: %.1f us, above %g us", na, nb,
                        res[i].lat_us, o->max_lat_us);
            ok = 0;
        }
        if (o->min_bw_mbs > 0 && res[i].bw_mbs < o->min_bw_mbs) {
            pl_vet_fail(v, "net.bandwidth", res[i].bw_mbs, o->min_bw_mbs,
                        json_pack("{s[ss]}", "nodes", na, nb),
                        "%s <-> %s: %.0f MB/s, under %g MB/s", na, nb,
                        res[i].bw_mbs, o->min_bw_mbs);
            ok = 0;
        }
        if (!ok)
            failed[a[i]] = failed[b[i]] = 1;
        json_object_set_new(p, "ok", json_boolean(ok));
        json_array_append_new(pairs, p);
        lat[i] = res[i].lat_us;
        bw[i] = res[i].bw_mbs;
        if (res[i].lat_us > res[worst_lat].lat_us)
            worst_lat = i;
        if (res[i].bw_mbs < res[worst_bw].bw_mbs)
            worst_bw = i;
    }
    json_object_set(v->out, "pairs", pairs);
    json_object_set_new(v->out, "slowest",
                        json_pack("{sOsO}", "latency",
                                  json_array_get(pairs, worst_lat),
                                  "bandwidth",
                                  json_array_get(pairs, worst_bw)));
    json_object_set_new(v->out, "median_latency_us",
                        json_real(median(lat, (size_t)np)));
    json_object_set_new(v->out, "median_bandwidth_mbs",
                        json_real(median(bw, (size_t)np)));
    /* the nodes of the pairs that failed, which vetting cordons */
    for (int r = 0; r < n; r++)
        if (failed[r])
            json_array_append_new(bad, json_string(host(names, r)));
    json_object_set(v->out, "failed_nodes", bad);
out:
    json_decref(pairs);
    json_decref(nodes);
    json_decref(bad);
    free(lat);
    free(bw);
    free(failed);
}

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        { "size", required_argument, NULL, 's' },
        { "iters", required_argument, NULL, 'i' },
        { "max-latency-us", required_argument, NULL, 'l' },
        { "min-bandwidth-mbs", required_argument, NULL, 'b' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    double x;
    int c;

    *o = (struct opts){ .size = 4 << 20, .iters = 100 };
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", longs, NULL)) != -1) {
        switch (c) {
        case 's':
            /* an int count of MPI_BYTE */
            if (pl_vet_number("--size", optarg, 1, 1 << 30, 1, &o->size) < 0)
                return -1;
            break;
        case 'i':
            if (pl_vet_number("--iters", optarg, 1, 1e6, 0, &x) < 0)
                return -1;
            o->iters = (int)x;
            break;
        case 'l':
            if (pl_vet_number("--max-latency-us", optarg, 0, 1e9, 0,
                              &o->max_lat_us) < 0)
                return -1;
            break;
        case 'b':
            if (pl_vet_number("--min-bandwidth-mbs", optarg, 0, 1e9, 0,
                              &o->min_bw_mbs) < 0)
                return -1;
            break;
        case 'h':
            pl_vet_usage(stdout, "net");
            exit(PL_VET_PASS);
        default:
            fprintf(stderr, "pilot-vetcheck: net: bad option '%s'\n",
                    argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "pilot-vetcheck: net: unexpected '%s'\n",
                argv[optind]);
        return -1;
    }
    return 0;
}

int pl_vet_net(int argc, char **argv)
{
    char name[MPI_MAX_PROCESSOR_NAME] = "", *names = NULL, *buf = NULL;
    struct pair *res = NULL, *round = NULL, mine;
    int *a = NULL, *b = NULL;
    int me, n, m, len, np = 0, rc = PL_VET_CANNOT;
    struct pl_vet v = { 0 };
    struct opts o;
    double t0;

    if (parse(argc, argv, &o) < 0) {
        pl_vet_usage(stderr, "net");
        return PL_VET_USAGE;
    }
    MPI_Init(NULL, NULL);
    t0 = MPI_Wtime();
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Get_processor_name(name, &len);
    m = n % 2 ? n + 1 : n;
    /* every rank allocates, and all agree before any sends */
    int ok = (buf = malloc((size_t)o.size)) != NULL, all;
    if (ok)
        memset(buf, 0x5a, (size_t)o.size);
    if (me == 0) {
        names = calloc((size_t)n, MPI_MAX_PROCESSOR_NAME);
        round = calloc((size_t)n, sizeof(*round));
        res = calloc((size_t)n * (size_t)n / 2 + 1, sizeof(*res));
        a = calloc((size_t)n * (size_t)n / 2 + 1, sizeof(*a));
        b = calloc((size_t)n * (size_t)n / 2 + 1, sizeof(*b));
        ok = ok && names && round && res && a && b
             && pl_vet_init(&v, "net") == 0;
    }
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (me == 0)
            fprintf(stderr, "pilot-vetcheck: net: out of memory\n");
        goto out;
    }
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names,
               MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (me == 0) {
        json_object_set_new(v.out, "pattern", json_string("all-pairs"));
        json_object_set_new(v.out, "ranks", json_integer(n));
        json_object_set_new(v.out, "rounds", json_integer(n < 2 ? 0 : m - 1));
        json_object_set_new(v.out, "latency_bytes", json_integer(LAT_BYTES));
        json_object_set_new(v.out, "size", json_integer((json_int_t)o.size));
        json_object_set_new(v.out, "iters", json_integer(o.iters));
        json_object_set_new(v.out, "limits",
                            json_pack("{sfsf}", "max_latency_us",
                                      o.max_lat_us, "min_bandwidth_mbs",
                                      o.min_bw_mbs));
    }
    if (n < 2) {
        if (me == 0)
            pl_vet_cannot(&v, "net needs 2 ranks or more, one a node "
                              "(srun --mpi=pmix -N2 --ntasks-per-node=1)");
        goto out;
    }
    for (int r = 0; r < m - 1; r++) {
        int peer = pl_vet_partner(me, r, m);

        mine = (struct pair){ .peer = -1 };
        if (peer < n)
            mine = measure(buf, &o, me, peer);
        MPI_Gather(&mine, 3, MPI_DOUBLE, round, 3, MPI_DOUBLE, 0,
                   MPI_COMM_WORLD);
        for (int i = 0; me == 0 && i < n; i++) {
            if (round[i].peer < 0)
                continue;
            a[np] = i;
            b[np] = (int)round[i].peer;
            res[np++] = round[i];
        }
    }
    if (me == 0) {
        report(&v, &o, n, names, a, b, res, np);
        json_object_set_new(v.out, "seconds", json_real(MPI_Wtime() - t0));
    }
out:
    if (me == 0 && v.out)
        rc = pl_vet_end(&v);
    /* every rank exits as rank 0 does, so srun's status says it too */
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    free(buf);
    free(names);
    free(round);
    free(res);
    free(a);
    free(b);
    return rc;
}
