/* examples/pool/join.c - a distributed hash join, a pool function
 *
 *     join LEFT_ROWS RIGHT_ROWS KEYS SKEW SEED [OUTDIR]
 *
 * Joins two generated tables (table.h: left is table 1, right table 2,
 * both with keys in [0, KEYS), skew SKEW, seed SEED) on their key.  Each
 * rank
 *  1. generates its slice of both tables;
 *  2. sends each row to the rank a hash of its key names (MPI_Alltoall of
 *     the counts, MPI_Alltoallv of the rows), so equal keys meet;
 *  3. builds a hash table of its right rows and probes it with its left
 *     rows: the matching pairs and their checksum (table.h), summed per
 *     key, so a frequent key costs no more than its rows;
 *  4. with OUTDIR, writes its joined pairs to OUTDIR/part-RANK.
 * Then the global checks (MPI_Allreduce): as many rows of each side
 * arrived as were generated, with the same multiset checksum, and each on
 * the rank its key's hash names.  Rank 0 prints one line to stdout:
 *
 *     join left=L right=R keys=K skew=S seed=X matches=M checksum=C
 *
 * and every rank returns 0; 2 if a check failed (rank 0 says which on
 * stderr); 1 for bad arguments or an error a rank met (memory, OUTDIR).
 * poolcheck computes the same line in one process.
 *
 * OUTDIR/part-RANK holds this rank's pairs, in no particular order, as
 * records of three uint64 in the host's byte order (little-endian on
 * x86-64 and arm64): key, left value, right value.  A rank refuses to
 * write more than 1 GiB of them; leave OUTDIR out for big joins.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/pool/exch.h"
#include "examples/pool/table.h"
#include "worker/pilot_fn.h"

/* the pairs one rank may write: 1 GiB of 24-byte records */
#define MAX_OUT_PAIRS ((1ULL << 30) / 24)

/* one key of the right side */
struct slot {
    uint64_t key;
    uint64_t nrows;         /* right rows with this key */
    uint64_t sum;           /* sum of tab_join_right() over them */
    int64_t head;           /* the first of them, -1: slot unused */
};

struct htab {
    struct slot *slots;
    size_t mask;            /* slots - 1, slots a power of 2 */
    int64_t *next;          /* right row i's next with the same key */
};

/* the rank that owns 'key' of 'size' */
static int owner(uint64_t key, int size)
{
    /* the top bits of a hash salted differently from the hash table's,
     * so a rank's keys still spread over its slots */
    uint64_t h = tab_mix64(key ^ 0x5851f42d4c957f2dULL);
    return (int)(((unsigned __int128)h * (unsigned)size) >> 64);
}

/* Regroup rows[0..n-1] by owner into *out (a new array; the caller frees
 * it) and fill counts[0..size-1].  Returns 0 or -1 (no memory). */
static int partition(const struct tab_row *rows, size_t n, int size,
                     int *counts, struct tab_row **out)
{
    size_t *at = NULL;
    struct tab_row *o = NULL;

    if (!(at = calloc((size_t)size, sizeof(*at)))
        || !(o = malloc((n ? n : 1) * sizeof(*o))))
        goto error;
    for (size_t i = 0; i < n; i++)
        at[owner(rows[i].key, size)]++;
    size_t sum = 0;
    for (int d = 0; d < size; d++) {
        counts[d] = (int)at[d];     /* n <= INT_MAX */
        size_t c = at[d];
        at[d] = sum;
        sum += c;
    }
    for (size_t i = 0; i < n; i++)
        o[at[owner(rows[i].key, size)]++] = rows[i];
    free(at);
    *out = o;
    return 0;
error:
    free(at);
    free(o);
    return -1;
}

static struct slot *find(const struct htab *h, uint64_t key)
{
    size_t i = tab_mix64(key) & h->mask;

    /* linear probing: the table is at most half full, so this ends */
    while (h->slots[i].head >= 0 && h->slots[i].key != key)
        i = (i + 1) & h->mask;
    return &h->slots[i];
}

/* Build the hash table of right rows r[0..n-1].  0 or -1 (no memory). */
static int build(struct htab *h, const struct tab_row *r, size_t n)
{
    size_t cap = 16;

    while (cap < 2 * n)
        cap *= 2;
    memset(h, 0, sizeof(*h));
    if (!(h->slots = malloc(cap * sizeof(*h->slots)))
        || !(h->next = malloc((n ? n : 1) * sizeof(*h->next)))) {
        free(h->slots);
        return -1;
    }
    h->mask = cap - 1;
    for (size_t i = 0; i < cap; i++)
        h->slots[i].head = -1;
    for (size_t i = 0; i < n; i++) {
        struct slot *s = find(h, r[i].key);
        if (s->head < 0) {
            s->key = r[i].key;
            s->nrows = 0;
            s->sum = 0;
        }
        s->nrows++;
        s->sum += tab_join_right(&r[i]);
        h->next[i] = s->head;
        s->head = (int64_t)i;
    }
    return 0;
}

static void htab_free(struct htab *h)
{
    free(h->slots);
    free(h->next);
}

/* Write every pair of left rows l[0..nl-1] with right rows r[] to f */
static int write_pairs(struct ex *e, FILE *f, const struct htab *h,
                       const struct tab_row *l, size_t nl,
                       const struct tab_row *r)
{
    uint64_t buf[3 * 4096];
    size_t n = 0;

    for (size_t i = 0; i < nl; i++) {
        const struct slot *s = find(h, l[i].key);
        for (int64_t j = s->head; j >= 0; j = h->next[j]) {
            buf[n++] = l[i].key;
            buf[n++] = l[i].value;
            buf[n++] = r[j].value;
            if (n == sizeof(buf) / sizeof(buf[0])) {
                if (fwrite(buf, sizeof(buf[0]), n, f) != n)
                    goto error;
                n = 0;
            }
        }
    }
    if (n && fwrite(buf, sizeof(buf[0]), n, f) != n)
        goto error;
    return 0;
error:
    ex_seterr(e, "part-%d: write: %s", e->rank, strerror(errno));
    return -1;
}

/* the sums of the global checks and the result, reduced with MPI_SUM */
enum {
    S_GEN_L, S_GEN_R,       /* rows generated */
    S_GOT_L, S_GOT_R,       /* rows received in the shuffle */
    S_SUM_GEN_L, S_SUM_GEN_R, /* multiset checksums (tab_row_hash) */
    S_SUM_GOT_L, S_SUM_GOT_R,
    S_ASTRAY,               /* rows received by a rank that does not own
                               their key */
    S_MATCHES, S_CHECKSUM,
    NSUMS
};

static uint64_t hash_sum(const struct tab_row *rows, size_t n)
{
    uint64_t s = 0;

    for (size_t i = 0; i < n; i++)
        s += tab_row_hash(&rows[i]);
    return s;
}

/* Generate this rank's slice of table 'g' into a new *rows. */
static int slice(struct ex *e, const struct tab_gen *g,
                 struct tab_row **rows, size_t *n)
{
    uint64_t a = tab_slice_start(g->rows, e->rank, e->size);
    uint64_t b = tab_slice_start(g->rows, e->rank + 1, e->size);

    *rows = NULL;
    *n = 0;
    if (b - a > EX_MAX_ROWS) {
        ex_seterr(e, "%llu rows per rank, more than MPI's int counts "
                  "allow; use more ranks", (unsigned long long)(b - a));
        return -1;
    }
    if (!(*rows = malloc((b > a ? b - a : 1) * sizeof(**rows)))) {
        ex_seterr(e, "out of memory for %llu rows",
                  (unsigned long long)(b - a));
        return -1;
    }
    *n = (size_t)(b - a);
    tab_gen_rows(g, a, *n, *rows);
    return 0;
}

static int usage(const struct pilot_fn_ctx *ctx, const char *why)
{
    if (ctx->rank == 0)
        fprintf(stderr, "join: %s\n"
                "usage: join LEFT_ROWS RIGHT_ROWS KEYS SKEW SEED [OUTDIR]\n",
                why);
    return 1;
}

__attribute__((visibility("default")))
int join(const struct pilot_fn_ctx *ctx, int argc, char **argv);

int join(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    uint64_t nleft, nright, keys, seed;
    double skew;
    struct ex e;
    struct tab_gen gl = { 0 }, gr = { 0 };
    struct tab_row *l = NULL, *r = NULL, *lp = NULL, *rp = NULL;
    size_t nl = 0, nr = 0;
    int *counts = NULL;
    struct htab h = { 0 };
    uint64_t sums[NSUMS] = { 0 }, tot[NSUMS];
    int rc = 1;

    if (argc != 6 && argc != 7)
        return usage(ctx, "wrong number of arguments");
    if (tab_parse_u64(argv[1], &nleft) < 0
        || tab_parse_u64(argv[2], &nright) < 0)
        return usage(ctx, "LEFT_ROWS and RIGHT_ROWS are counts");
    if (tab_parse_u64(argv[3], &keys) < 0 || keys == 0)
        return usage(ctx, "KEYS is a count >= 1");
    if (tab_parse_skew(argv[4], &skew) < 0)
        return usage(ctx, "SKEW is a number in [0, 100]");
    if (tab_parse_u64(argv[5], &seed) < 0)
        return usage(ctx, "SEED is an unsigned 64-bit integer");
    const char *outdir = argc == 7 ? argv[6] : NULL;
    if (ex_init(&e, ctx, "join") < 0)
        return 1;

    /* 1. this rank's slices */
    if (tab_gen_init(&gl, nleft, keys, skew, seed, TAB_JOIN_LEFT) < 0
        || tab_gen_init(&gr, nright, keys, skew, seed, TAB_JOIN_RIGHT) < 0)
        ex_seterr(&e, "table: %s", strerror(errno));
    else if (slice(&e, &gl, &l, &nl) == 0)
        slice(&e, &gr, &r, &nr);
    if (ex_failed(&e))
        goto done;
    sums[S_GEN_L] = nl;
    sums[S_GEN_R] = nr;
    sums[S_SUM_GEN_L] = hash_sum(l, nl);
    sums[S_SUM_GEN_R] = hash_sum(r, nr);
    ex_phase(&e, "generated");

    /* 2. the shuffle, one side at a time: a side's rows are freed before
     * the other is sent, so a rank holds at most two copies of one */
    if (!(counts = malloc((size_t)e.size * sizeof(*counts))))
        ex_seterr(&e, "out of memory");
    else if (partition(l, nl, e.size, counts, &lp) < 0)
        ex_seterr(&e, "out of memory partitioning %zu rows", nl);
    if (ex_failed(&e))
        goto done;
    free(l);
    l = NULL;
    if (ex_shuffle(&e, lp, counts, &l, &nl) < 0)
        goto done;
    free(lp);
    lp = NULL;
    if (partition(r, nr, e.size, counts, &rp) < 0)
        ex_seterr(&e, "out of memory partitioning %zu rows", nr);
    if (ex_failed(&e))
        goto done;
    free(r);
    r = NULL;
    if (ex_shuffle(&e, rp, counts, &r, &nr) < 0)
        goto done;
    free(rp);
    rp = NULL;
    sums[S_GOT_L] = nl;
    sums[S_GOT_R] = nr;
    sums[S_SUM_GOT_L] = hash_sum(l, nl);
    sums[S_SUM_GOT_R] = hash_sum(r, nr);
    for (size_t i = 0; i < nl; i++)
        sums[S_ASTRAY] += owner(l[i].key, e.size) != e.rank;
    for (size_t i = 0; i < nr; i++)
        sums[S_ASTRAY] += owner(r[i].key, e.size) != e.rank;
    ex_phase(&e, "shuffled");

    /* 3. build on the right, probe with the left */
    if (build(&h, r, nr) < 0)
        ex_seterr(&e, "out of memory for the hash table of %zu rows", nr);
    if (ex_failed(&e))
        goto done;
    for (size_t i = 0; i < nl; i++) {
        const struct slot *s = find(&h, l[i].key);
        if (s->head < 0)
            continue;
        sums[S_MATCHES] += s->nrows;
        sums[S_CHECKSUM] += tab_join_left(&l[i]) * s->sum;
    }
    ex_phase(&e, "joined");

    /* 4. the pairs, if asked */
    if (outdir) {
        if (sums[S_MATCHES] > MAX_OUT_PAIRS)
            ex_seterr(&e, "%llu pairs to write, more than the %llu (1 GiB) "
                      "a rank writes; leave OUTDIR out",
                      (unsigned long long)sums[S_MATCHES], MAX_OUT_PAIRS);
        else {
            FILE *f = ex_part_open(&e, outdir);
            if (f) {
                write_pairs(&e, f, &h, l, nl, r);
                ex_part_close(&e, f, outdir);
            }
        }
        if (ex_failed(&e))
            goto done;
        ex_phase(&e, "written");
    }

    /* the global checks; the sums wrap mod 2^64, as the checksums do */
    MPI_Allreduce(sums, tot, NSUMS, MPI_UINT64_T, MPI_SUM, e.comm);
    rc = 0;
    if (tot[S_GEN_L] != nleft || tot[S_GEN_R] != nright) {
        if (e.rank == 0)
            fprintf(stderr, "join: generated %llu left and %llu right rows,"
                    " not %llu and %llu\n",
                    (unsigned long long)tot[S_GEN_L],
                    (unsigned long long)tot[S_GEN_R],
                    (unsigned long long)nleft, (unsigned long long)nright);
        rc = 2;
    }
    if (tot[S_GOT_L] != tot[S_GEN_L] || tot[S_GOT_R] != tot[S_GEN_R]) {
        if (e.rank == 0)
            fprintf(stderr, "join: the shuffle delivered %llu left and %llu "
                    "right rows of %llu and %llu sent\n",
                    (unsigned long long)tot[S_GOT_L],
                    (unsigned long long)tot[S_GOT_R],
                    (unsigned long long)tot[S_GEN_L],
                    (unsigned long long)tot[S_GEN_R]);
        rc = 2;
    }
    if (tot[S_SUM_GOT_L] != tot[S_SUM_GEN_L]
        || tot[S_SUM_GOT_R] != tot[S_SUM_GEN_R]) {
        if (e.rank == 0)
            fprintf(stderr, "join: the rows after the shuffle are not the "
                    "rows before it (multiset checksums differ)\n");
        rc = 2;
    }
    if (tot[S_ASTRAY]) {
        if (e.rank == 0)
            fprintf(stderr, "join: %llu rows landed on a rank that does not "
                    "own their key\n", (unsigned long long)tot[S_ASTRAY]);
        rc = 2;
    }
    if (e.rank == 0 && rc == 0) {
        printf("join left=%llu right=%llu keys=%llu skew=%g seed=%llu "
               "matches=%llu checksum=%llu\n",
               (unsigned long long)nleft, (unsigned long long)nright,
               (unsigned long long)keys, skew, (unsigned long long)seed,
               (unsigned long long)tot[S_MATCHES],
               (unsigned long long)tot[S_CHECKSUM]);
    }
    ex_phase(&e, "checked");
done:
    /* the worker moves stdout between tasks: leave nothing buffered */
    fflush(stdout);
    fflush(stderr);
    htab_free(&h);
    free(counts);
    free(l);
    free(r);
    free(lp);
    free(rp);
    tab_gen_free(&gl);
    tab_gen_free(&gr);
    ex_fini(&e);
    return rc;
}
