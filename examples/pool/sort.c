/* examples/pool/sort.c - a distributed sample sort, a pool function
 *
 *     sort ROWS KEYS SKEW SEED [OUTDIR]
 *
 * Sorts a generated table (table.h: table 3, keys in [0, KEYS), skew
 * SKEW, seed SEED) by key, then value, across the task's ranks, rank 0
 * holding the smallest rows.  Each rank
 *  1. generates its slice and sorts it;
 *  2. takes SAMPLES evenly spaced rows of it; every rank gathers all the
 *     samples (MPI_Allgather of their numbers, MPI_Allgatherv of the
 *     rows), sorts them and takes size-1 splitters at even ranks of them;
 *  3. sends each row to the rank between the splitters around it
 *     (MPI_Alltoall of the counts, MPI_Alltoallv of the rows) and sorts
 *     what it received.
 * The splitters are (key, value) pairs, so the rows of one frequent key
 * spread over ranks by value: skew does not pile them onto one rank.
 * Then the global checks: each rank's rows are in order, no rank's first
 * row is below any earlier rank's last (MPI_Exscan with a max over the
 * ranks' last rows: an empty rank in between does not hide a break), and
 * the row count and multiset checksum are those generated
 * (MPI_Allreduce).  Rank 0 prints one line to stdout:
 *
 *     sort rows=N keys=K skew=S seed=X checksum=C ok
 *
 * C, the sum of tab_row_hash(row) * (2i + 1) over the sorted table, i a
 * row's position (MPI_Exscan of the counts gives each rank its first),
 * holds only for the sorted table: poolcheck sorts the table in one
 * process and must print the same line.  Every rank returns 0; 2 if a
 * check failed (rank 0 says which on stderr); 1 for bad arguments or an
 * error a rank met (memory, OUTDIR).
 *
 * OUTDIR/part-RANK holds this rank's sorted rows as records of two uint64
 * in the host's byte order (little-endian on x86-64 and arm64): key,
 * value.  part-0, part-1, ... in a row are the sorted table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/pool/exch.h"
#include "examples/pool/table.h"
#include "worker/pilot_fn.h"

/* samples per rank: with s samples from each of p ranks, a rank receives
 * at most about n/p + n/s rows (regular sampling), so 128 keeps the
 * largest within 1/128 of the table above an even share, for 2 KiB a
 * rank in the MPI_Allgatherv */
#define SAMPLES 128

/* a rank's last row, for the MPI_Exscan of the order check */
struct edge {
    uint64_t has;           /* 1: the ranks so far had a row; 0: none */
    uint64_t key;
    uint64_t value;
};

/* MPI_User_function: the larger of two edges, an empty one the
 * smallest */
static void edge_max(void *in, void *inout, int *len, MPI_Datatype *type)
{
    const struct edge *a = in;
    struct edge *b = inout;

    (void)type;
    for (int i = 0; i < *len; i++) {
        struct tab_row ra = { a[i].key, a[i].value };
        struct tab_row rb = { b[i].key, b[i].value };
        if (a[i].has && (!b[i].has || tab_row_cmp(&ra, &rb) > 0))
            b[i] = a[i];
    }
}

/* the first of rows[0..n-1] (sorted) above 'x' */
static size_t upper_bound(const struct tab_row *rows, size_t n,
                          const struct tab_row *x)
{
    size_t a = 0, b = n;

    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (tab_row_cmp(&rows[m], x) <= 0)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

/* Steps 2 and 3's counts: into counts[0..size-1], how many of the sorted
 * rows[0..n-1] go to each rank.  Collective. */
static int split(struct ex *e, const struct tab_row *rows, size_t n,
                 int *counts)
{
    int p = e->size;
    int mine = (int)(n < SAMPLES ? n : SAMPLES);
    int *nsamp = NULL, *displ = NULL;
    struct tab_row samp[SAMPLES], *all = NULL;

    for (int j = 0; j < mine; j++)
        samp[j] = rows[((2 * (size_t)j + 1) * n) / (2 * (size_t)mine)];
    if (!(nsamp = malloc((size_t)p * sizeof(*nsamp)))
        || !(displ = malloc((size_t)p * sizeof(*displ)))
        || !(all = malloc((size_t)p * SAMPLES * sizeof(*all))))
        ex_seterr(e, "out of memory for the samples");
    if (ex_failed(e))
        goto error;
    MPI_Allgather(&mine, 1, MPI_INT, nsamp, 1, MPI_INT, e->comm);
    int total = 0;
    for (int d = 0; d < p; d++) {
        displ[d] = total;
        total += nsamp[d];
    }
    MPI_Allgatherv(samp, mine, e->row_type, all, nsamp, displ, e->row_type,
                   e->comm);
    qsort(all, (size_t)total, sizeof(*all), tab_row_cmp);
    /* rank d takes the rows above splitter d-1, up to splitter d
     * included: samples total*d/p; no samples means no rows anywhere */
    size_t prev = 0;
    for (int d = 0; d < p; d++) {
        size_t end = n;
        if (d + 1 < p && total > 0) {
            size_t k = (size_t)total * (size_t)(d + 1) / (size_t)p;
            end = upper_bound(rows, n, &all[k]);    /* k < total */
        } else if (d + 1 < p)
            end = 0;
        if (end < prev)
            end = prev;
        counts[d] = (int)(end - prev);      /* n <= INT_MAX */
        prev = end;
    }
    free(nsamp);
    free(displ);
    free(all);
    return 0;
error:
    free(nsamp);
    free(displ);
    free(all);
    return -1;
}

/* the sums of the global checks and the result, reduced with MPI_SUM */
enum {
    S_GEN,                  /* rows generated */
    S_GOT,                  /* rows after the exchange */
    S_SUM_GEN,              /* multiset checksums (tab_row_hash) */
    S_SUM_GOT,
    S_UNSORTED,             /* rows below the row before them, in a rank */
    S_BREAKS,               /* ranks whose first row is below an earlier
                               rank's last */
    S_CHECKSUM,             /* the sorted table's (order-dependent) */
    NSUMS
};

static int usage(const struct pilot_fn_ctx *ctx, const char *why)
{
    if (ctx->rank == 0)
        fprintf(stderr, "sort: %s\n"
                "usage: sort ROWS KEYS SKEW SEED [OUTDIR]\n", why);
    return 1;
}

__attribute__((visibility("default")))
int sort(const struct pilot_fn_ctx *ctx, int argc, char **argv);

int sort(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    uint64_t nrows, keys, seed;
    double skew;
    struct ex e;
    struct tab_gen g = { 0 };
    struct tab_row *rows = NULL, *got = NULL;
    size_t n = 0, ngot = 0;
    int *counts = NULL;
    MPI_Datatype edge_type = MPI_DATATYPE_NULL;
    MPI_Op edge_op = MPI_OP_NULL;
    uint64_t sums[NSUMS] = { 0 }, tot[NSUMS];
    int rc = 1;

    if (argc != 5 && argc != 6)
        return usage(ctx, "wrong number of arguments");
    if (tab_parse_u64(argv[1], &nrows) < 0)
        return usage(ctx, "ROWS is a count");
    if (tab_parse_u64(argv[2], &keys) < 0 || keys == 0)
        return usage(ctx, "KEYS is a count >= 1");
    if (tab_parse_skew(argv[3], &skew) < 0)
        return usage(ctx, "SKEW is a number in [0, 100]");
    if (tab_parse_u64(argv[4], &seed) < 0)
        return usage(ctx, "SEED is an unsigned 64-bit integer");
    const char *outdir = argc == 6 ? argv[5] : NULL;
    if (ex_init(&e, ctx, "sort") < 0)
        return 1;

    /* 1. this rank's slice, sorted */
    uint64_t a = tab_slice_start(nrows, e.rank, e.size);
    uint64_t b = tab_slice_start(nrows, e.rank + 1, e.size);
    if (b - a > EX_MAX_ROWS)
        ex_seterr(&e, "%llu rows per rank, more than MPI's int counts "
                  "allow; use more ranks", (unsigned long long)(b - a));
    else if (tab_gen_init(&g, nrows, keys, skew, seed, TAB_SORT) < 0)
        ex_seterr(&e, "table: %s", strerror(errno));
    else if (!(rows = malloc((b > a ? b - a : 1) * sizeof(*rows)))
             || !(counts = malloc((size_t)e.size * sizeof(*counts))))
        ex_seterr(&e, "out of memory for %llu rows",
                  (unsigned long long)(b - a));
    if (ex_failed(&e))
        goto done;
    n = (size_t)(b - a);
    tab_gen_rows(&g, a, n, rows);
    sums[S_GEN] = n;
    for (size_t i = 0; i < n; i++)
        sums[S_SUM_GEN] += tab_row_hash(&rows[i]);
    qsort(rows, n, sizeof(*rows), tab_row_cmp);
    ex_phase(&e, "generated and sorted");

    /* 2. and 3. */
    if (split(&e, rows, n, counts) < 0)
        goto done;
    if (ex_shuffle(&e, rows, counts, &got, &ngot) < 0)
        goto done;
    free(rows);
    rows = NULL;
    ex_phase(&e, "exchanged");
    /* the runs from each rank are sorted already; qsort does not care,
     * and a p-way merge would be more code for an example */
    qsort(got, ngot, sizeof(*got), tab_row_cmp);
    ex_phase(&e, "sorted");

    /* the checks of this rank */
    sums[S_GOT] = ngot;
    for (size_t i = 0; i < ngot; i++) {
        sums[S_SUM_GOT] += tab_row_hash(&got[i]);
        if (i > 0 && tab_row_cmp(&got[i - 1], &got[i]) > 0)
            sums[S_UNSORTED]++;
    }
    /* the largest last row of the ranks before this one */
    struct edge last = { 0, 0, 0 }, before = { 0, 0, 0 };
    if (ngot)
        last = (struct edge){ 1, got[ngot - 1].key, got[ngot - 1].value };
    MPI_Type_contiguous(3, MPI_UINT64_T, &edge_type);
    MPI_Type_commit(&edge_type);
    MPI_Op_create(edge_max, 1, &edge_op);
    MPI_Exscan(&last, &before, 1, edge_type, edge_op, e.comm);
    if (e.rank > 0 && before.has && ngot) {
        struct tab_row prev = { before.key, before.value };
        if (tab_row_cmp(&prev, &got[0]) > 0)
            sums[S_BREAKS]++;
    }
    /* this rank's first position in the sorted table */
    uint64_t first = 0, cnt = ngot;
    MPI_Exscan(&cnt, &first, 1, MPI_UINT64_T, MPI_SUM, e.comm);
    if (e.rank == 0)
        first = 0;          /* MPI_Exscan leaves rank 0's undefined */
    for (size_t i = 0; i < ngot; i++)
        sums[S_CHECKSUM] += tab_row_hash(&got[i]) * (2 * (first + i) + 1);

    if (outdir) {
        FILE *f = ex_part_open(&e, outdir);
        if (f) {
            if (fwrite(got, sizeof(*got), ngot, f) != ngot)
                ex_seterr(&e, "%s/part-%d: write: %s", outdir, e.rank,
                          strerror(errno));
            ex_part_close(&e, f, outdir);
        }
        if (ex_failed(&e))
            goto done;
        ex_phase(&e, "written");
    }

    /* the global checks; the sums wrap mod 2^64, as the checksums do */
    MPI_Allreduce(sums, tot, NSUMS, MPI_UINT64_T, MPI_SUM, e.comm);
    rc = 0;
    if (tot[S_GEN] != nrows || tot[S_GOT] != nrows) {
        if (e.rank == 0)
            fprintf(stderr, "sort: %llu rows generated and %llu after the "
                    "exchange, not %llu\n", (unsigned long long)tot[S_GEN],
                    (unsigned long long)tot[S_GOT],
                    (unsigned long long)nrows);
        rc = 2;
    }
    if (tot[S_SUM_GOT] != tot[S_SUM_GEN]) {
        if (e.rank == 0)
            fprintf(stderr, "sort: the rows after the exchange are not the "
                    "rows generated (multiset checksums differ)\n");
        rc = 2;
    }
    if (tot[S_UNSORTED] || tot[S_BREAKS]) {
        if (e.rank == 0)
            fprintf(stderr, "sort: out of order: %llu rows within ranks, "
                    "%llu between ranks\n",
                    (unsigned long long)tot[S_UNSORTED],
                    (unsigned long long)tot[S_BREAKS]);
        rc = 2;
    }
    if (e.rank == 0 && rc == 0)
        printf("sort rows=%llu keys=%llu skew=%g seed=%llu checksum=%llu "
               "ok\n", (unsigned long long)nrows, (unsigned long long)keys,
               skew, (unsigned long long)seed,
               (unsigned long long)tot[S_CHECKSUM]);
    ex_phase(&e, "checked");
done:
    /* the worker moves stdout between tasks: leave nothing buffered */
    fflush(stdout);
    fflush(stderr);
    if (edge_op != MPI_OP_NULL)
        MPI_Op_free(&edge_op);
    if (edge_type != MPI_DATATYPE_NULL)
        MPI_Type_free(&edge_type);
    free(counts);
    free(rows);
    free(got);
    tab_gen_free(&g);
    ex_fini(&e);
    return rc;
}
