/* examples/pool/table.c - the pool examples' tables: deterministic rows
 * that any number of ranks can generate in slices (table.h) */
#include "examples/pool/table.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN 0x9e3779b97f4a7c15ULL /* splitmix64's increment: 2^64/phi */

/* the keys below this one each have their own entry in the Zipf table;
 * the rest share buckets 1/64 of their start wide, so the table holds at
 * most 65,536 + 64 * ln(2^64 / 2^16) / ln(1 + 1/64) + 1 < 67,700 entries */
#define ZIPF_HEAD 65536
#define ZIPF_BUCKET_SHIFT 6

uint64_t tab_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* floor(a * b / 2^64): 'a' as a fraction of 2^64, scaled to [0, b) */
static uint64_t mulhi(uint64_t a, uint64_t b)
{
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
}

/* The integral of x^-s from a to b, a > 0: the weight of a bucket of
 * keys.  Near s = 1 the closed form (b^(1-s) - a^(1-s)) / (1-s) loses
 * every digit to cancellation, hence expm1 and log1p. */
static double integral(double a, double b, double s)
{
    double lr = log1p((b - a) / a);   /* log(b / a) */
    double t = 1.0 - s;

    if (fabs(t) < 1e-12)
        return lr;
    return pow(a, t) * expm1(t * lr) / t;
}

/* 'f' in [0, 1] as a fraction of 2^64, saturated at 2^64 - 1 */
static uint64_t frac64(double f)
{
    if (f >= 1.0)
        return UINT64_MAX;
    return (uint64_t)ldexp(f, 64);
}

static int zipf_init(struct tab_gen *g)
{
    uint64_t k = g->keys;
    size_t head = k < ZIPF_HEAD ? (size_t)k : ZIPF_HEAD;
    size_t n = head;
    double *w = NULL;

    for (uint64_t lo = head; lo < k; n++) {
        uint64_t wd = lo >> ZIPF_BUCKET_SHIFT;
        lo = wd < k - lo ? lo + wd : k;
    }
    if (!(w = malloc(n * sizeof(*w)))
        || !(g->thresh = malloc(n * sizeof(*g->thresh)))
        || !(g->lo = malloc((n + 1) * sizeof(*g->lo))))
        goto error;
    g->nent = n;
    for (size_t i = 0; i < head; i++) {
        g->lo[i] = i;
        w[i] = pow((double)(i + 1), -g->skew);
    }
    uint64_t lo = head;
    for (size_t i = head; i < n; i++) {
        uint64_t wd = lo >> ZIPF_BUCKET_SHIFT;
        uint64_t hi = wd < k - lo ? lo + wd : k;

        /* keys lo..hi-1 have ranks lo+1..hi: x^-s on [lo+1/2, hi+1/2] */
        g->lo[i] = lo;
        w[i] = integral((double)lo + 0.5, (double)hi + 0.5, g->skew);
        lo = hi;
    }
    g->lo[n] = k;
    /* the sums run in one order everywhere, so every process gets the
     * same thresholds */
    double total = 0.0, sum = 0.0;
    for (size_t i = 0; i < n; i++)
        total += w[i];
    for (size_t i = 0; i + 1 < n; i++) {
        sum += w[i];
        g->thresh[i] = frac64(sum / total);
    }
    free(w);
    return 0;
error:
    free(w);
    free(g->thresh);
    g->thresh = NULL;
    errno = ENOMEM;
    return -1;
}

int tab_gen_init(struct tab_gen *g, uint64_t rows, uint64_t keys,
                 double skew, uint64_t seed, unsigned id)
{
    memset(g, 0, sizeof(*g));
    if (keys == 0 || !isfinite(skew) || skew < 0.0) {
        errno = EINVAL;
        return -1;
    }
    g->rows = rows;
    g->keys = keys;
    g->skew = skew;
    g->base = tab_mix64(tab_mix64(seed) + (uint64_t)id * GOLDEN);
    /* one key needs no table, and skew 0 is a plain uniform draw */
    if (skew > 0.0 && keys > 1 && zipf_init(g) < 0)
        return -1;
    return 0;
}

void tab_gen_free(struct tab_gen *g)
{
    if (!g)
        return;
    int saved = errno;
    free(g->thresh);
    free(g->lo);
    g->thresh = g->lo = NULL;
    g->nent = 0;
    errno = saved;
}

static uint64_t zipf_key(const struct tab_gen *g, uint64_t u, uint64_t ctr)
{
    /* the first entry whose threshold is above u; the last entry has no
     * threshold and takes what is left */
    size_t a = 0, b = g->nent - 1;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (u < g->thresh[m])
            b = m;
        else
            a = m + 1;
    }
    uint64_t width = g->lo[a + 1] - g->lo[a];
    if (width == 1)
        return g->lo[a];
    return g->lo[a] + mulhi(tab_mix64(ctr + 2 * GOLDEN), width);
}

void tab_gen_rows(const struct tab_gen *g, uint64_t first, size_t n,
                  struct tab_row *out)
{
    for (size_t j = 0; j < n; j++) {
        /* row i uses counters 4i, 4i+1 and 4i+2 of the table's stream */
        uint64_t ctr = g->base + 4 * (first + j) * GOLDEN;
        uint64_t u = tab_mix64(ctr + GOLDEN);

        out[j].value = tab_mix64(ctr);
        out[j].key = g->nent ? zipf_key(g, u, ctr) : mulhi(u, g->keys);
    }
}

uint64_t tab_slice_start(uint64_t rows, int rank, int size)
{
    return (uint64_t)((unsigned __int128)rows * (unsigned)rank
                      / (unsigned)size);
}

int tab_row_cmp(const void *a, const void *b)
{
    const struct tab_row *x = a, *y = b;

    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    return 0;
}

uint64_t tab_join_left(const struct tab_row *l)
{
    return tab_mix64(l->key ^ tab_mix64(l->value + 0x243f6a8885a308d3ULL));
}

uint64_t tab_join_right(const struct tab_row *r)
{
    return tab_mix64(r->key + tab_mix64(r->value ^ 0x13198a2e03707344ULL));
}

uint64_t tab_row_hash(const struct tab_row *row)
{
    return tab_mix64(tab_mix64(row->key ^ 0xa4093822299f31d0ULL)
                     + row->value);
}

int tab_parse_u64(const char *s, uint64_t *v)
{
    char *end;

    /* strtoull takes a sign and spaces; a count takes neither */
    if (!s || *s < '0' || *s > '9') {
        errno = EINVAL;
        return -1;
    }
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno)
        return -1;
    if (*end) {
        errno = EINVAL;
        return -1;
    }
    *v = x;
    return 0;
}

int tab_parse_skew(const char *s, double *v)
{
    char *end;

    if (!s || !*s) {
        errno = EINVAL;
        return -1;
    }
    errno = 0;
    double x = strtod(s, &end);
    /* 100: key 1 already has 2^-100 of key 0's weight */
    if (*end || errno || !isfinite(x) || x < 0.0 || x > 100.0) {
        errno = EINVAL;
        return -1;
    }
    *v = x;
    return 0;
}
