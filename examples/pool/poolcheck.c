/* examples/pool/poolcheck.c - the pool examples' answers, computed in one
 * process without MPI, to check what join and sort print
 *
 * Usage:
 *   poolcheck join LEFT_ROWS RIGHT_ROWS KEYS SKEW SEED
 *   poolcheck sort ROWS KEYS SKEW SEED
 *       print the line rank 0 of join (sort) prints for these arguments,
 *       from the same tables (table.h), by another road: the join sorts
 *       both sides and merges them, the sort is one qsort(3).
 *   poolcheck pairs FILE...
 *       read join's OUTDIR/part-* (24-byte records: key, left value,
 *       right value) and print "matches=M checksum=C" of the pairs in
 *       them, the checksum summed pair by pair as table.h defines it.
 *   poolcheck sorted FILE...
 *       read sort's OUTDIR/part-* in the order given (16-byte records:
 *       key, value) and print "rows=N checksum=C"; exit 2 if the rows
 *       are not in order.
 * Exit status: 0, 1 for bad usage or an unreadable file, 2 as said.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/pool/table.h"

__attribute__((noreturn)) static void usage(void)
{
    fprintf(stderr,
            "usage: poolcheck join LEFT_ROWS RIGHT_ROWS KEYS SKEW SEED\n"
            "       poolcheck sort ROWS KEYS SKEW SEED\n"
            "       poolcheck pairs FILE...\n"
            "       poolcheck sorted FILE...\n");
    exit(1);
}

__attribute__((noreturn)) static void die(const char *what)
{
    fprintf(stderr, "poolcheck: %s: %s\n", what, strerror(errno));
    exit(1);
}

static uint64_t arg_u64(const char *s, const char *name)
{
    uint64_t v;

    if (tab_parse_u64(s, &v) < 0) {
        fprintf(stderr, "poolcheck: %s: not a count: '%s'\n", name, s);
        exit(1);
    }
    return v;
}

static double arg_skew(const char *s)
{
    double v;

    if (tab_parse_skew(s, &v) < 0) {
        fprintf(stderr, "poolcheck: SKEW: not a number in [0, 100]: "
                "'%s'\n", s);
        exit(1);
    }
    return v;
}

/* The whole of a table, sorted by key and value */
static struct tab_row *table(uint64_t rows, uint64_t keys, double skew,
                             uint64_t seed, unsigned id)
{
    struct tab_gen g;
    struct tab_row *t;

    if (rows > SIZE_MAX / sizeof(*t)) {
        errno = ENOMEM;
        die("table");
    }
    if (tab_gen_init(&g, rows, keys, skew, seed, id) < 0)
        die("table");
    if (!(t = malloc(rows ? rows * sizeof(*t) : 1)))
        die("table");
    tab_gen_rows(&g, 0, rows, t);
    tab_gen_free(&g);
    qsort(t, rows, sizeof(*t), tab_row_cmp);
    return t;
}

static int do_join(char **av)
{
    uint64_t nl = arg_u64(av[0], "LEFT_ROWS");
    uint64_t nr = arg_u64(av[1], "RIGHT_ROWS");
    uint64_t keys = arg_u64(av[2], "KEYS");
    double skew = arg_skew(av[3]);
    uint64_t seed = arg_u64(av[4], "SEED");
    uint64_t matches = 0, checksum = 0;

    if (keys == 0) {
        fprintf(stderr, "poolcheck: KEYS must be >= 1\n");
        return 1;
    }
    struct tab_row *l = table(nl, keys, skew, seed, TAB_JOIN_LEFT);
    struct tab_row *r = table(nr, keys, skew, seed, TAB_JOIN_RIGHT);
    /* merge the two sorted sides key group by key group */
    size_t i = 0, j = 0;
    while (i < nl && j < nr) {
        uint64_t k = l[i].key;
        if (r[j].key < k) {
            j++;
            continue;
        }
        uint64_t cl = 0, a = 0, cr = 0, b = 0;
        for (; i < nl && l[i].key == k; i++, cl++)
            a += tab_join_left(&l[i]);
        for (; j < nr && r[j].key == k; j++, cr++)
            b += tab_join_right(&r[j]);
        matches += cl * cr;
        checksum += a * b;
    }
    printf("join left=%llu right=%llu keys=%llu skew=%g seed=%llu "
           "matches=%llu checksum=%llu\n",
           (unsigned long long)nl, (unsigned long long)nr,
           (unsigned long long)keys, skew, (unsigned long long)seed,
           (unsigned long long)matches, (unsigned long long)checksum);
    free(l);
    free(r);
    return 0;
}

static int do_sort(char **av)
{
    uint64_t n = arg_u64(av[0], "ROWS");
    uint64_t keys = arg_u64(av[1], "KEYS");
    double skew = arg_skew(av[2]);
    uint64_t seed = arg_u64(av[3], "SEED");
    uint64_t checksum = 0;

    if (keys == 0) {
        fprintf(stderr, "poolcheck: KEYS must be >= 1\n");
        return 1;
    }
    struct tab_row *t = table(n, keys, skew, seed, TAB_SORT);
    for (uint64_t i = 0; i < n; i++)
        checksum += tab_row_hash(&t[i]) * (2 * i + 1);
    printf("sort rows=%llu keys=%llu skew=%g seed=%llu checksum=%llu ok\n",
           (unsigned long long)n, (unsigned long long)keys, skew,
           (unsigned long long)seed, (unsigned long long)checksum);
    free(t);
    return 0;
}

/* Read FILE's records of 'width' uint64 into 'cb' one at a time */
static void each_record(const char *path, size_t width,
                        void (*cb)(const uint64_t *rec, void *arg),
                        void *arg)
{
    FILE *f = fopen(path, "rb");
    uint64_t rec[3];
    size_t got;

    if (!f)
        die(path);
    while ((got = fread(rec, sizeof(rec[0]), width, f)) == width)
        cb(rec, arg);
    if (ferror(f))
        die(path);
    if (got != 0) {
        fprintf(stderr, "poolcheck: %s: a partial record at the end\n",
                path);
        exit(1);
    }
    fclose(f);
}

struct pairs {
    uint64_t matches;
    uint64_t checksum;
};

static void pair_cb(const uint64_t *rec, void *arg)
{
    struct pairs *p = arg;
    struct tab_row l = { rec[0], rec[1] }, r = { rec[0], rec[2] };

    p->matches++;
    p->checksum += tab_join_left(&l) * tab_join_right(&r);
}

struct sorted {
    uint64_t rows;
    uint64_t checksum;
    struct tab_row last;
    uint64_t breaks;
};

static void sorted_cb(const uint64_t *rec, void *arg)
{
    struct sorted *s = arg;
    struct tab_row row = { rec[0], rec[1] };

    if (s->rows > 0 && tab_row_cmp(&s->last, &row) > 0)
        s->breaks++;
    s->checksum += tab_row_hash(&row) * (2 * s->rows + 1);
    s->rows++;
    s->last = row;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    if (strcmp(argv[1], "join") == 0 && argc == 7)
        return do_join(argv + 2);
    if (strcmp(argv[1], "sort") == 0 && argc == 6)
        return do_sort(argv + 2);
    if (strcmp(argv[1], "pairs") == 0 && argc >= 3) {
        struct pairs p = { 0, 0 };
        for (int i = 2; i < argc; i++)
            each_record(argv[i], 3, pair_cb, &p);
        printf("matches=%llu checksum=%llu\n",
               (unsigned long long)p.matches,
               (unsigned long long)p.checksum);
        return 0;
    }
    if (strcmp(argv[1], "sorted") == 0 && argc >= 3) {
        struct sorted s = { 0 };
        for (int i = 2; i < argc; i++)
            each_record(argv[i], 2, sorted_cb, &s);
        printf("rows=%llu checksum=%llu\n", (unsigned long long)s.rows,
               (unsigned long long)s.checksum);
        if (s.breaks) {
            fprintf(stderr, "poolcheck: %llu rows below the row before "
                    "them\n", (unsigned long long)s.breaks);
            return 2;
        }
        return 0;
    }
    usage();
}
