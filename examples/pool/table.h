/* examples/pool/table.h - the pool examples' tables: deterministic rows
 * that any number of ranks can generate in slices
 *
 * A table is N rows of (key, value), two uint64.  Row i is a pure function
 * of (seed, table id, i): a counter-based generator (splitmix64's mixer on
 * seed, id and i) gives its random bits, so rank r of p generates rows
 * [r*N/p, (r+1)*N/p) on its own and every split of the table, one process
 * or a thousand, gives the same rows.
 *
 * Keys lie in [0, K).  With skew s = 0 they are uniform.  With s > 0 they
 * follow Zipf's law with exponent s: key k has probability proportional to
 * (k+1)^-s, so key 0 is the most frequent.  The first 65,536 keys are
 * exact; above them the keys come in buckets 1/64 of their start wide
 * (under 2,200 buckets up to 2^64), each bucket weighted by the integral
 * of x^-s over it and uniform inside, which is within 1.6% of Zipf there.
 * A sample is a binary search of 64 random bits in a table of cumulative
 * thresholds (at most 1.1 MB), so it costs no floating point per row; the
 * thresholds are computed with pow() and friends once, in the same order
 * on every process, so processes that share a libm agree bit for bit.
 *
 * The values are uniform 64-bit numbers.
 */
#ifndef POOLEX_TABLE_H
#define POOLEX_TABLE_H

#include <stddef.h>
#include <stdint.h>

/* the tables the examples use; any id gives an independent table */
enum {
    TAB_JOIN_LEFT = 1,
    TAB_JOIN_RIGHT = 2,
    TAB_SORT = 3,
};

struct tab_row {
    uint64_t key;
    uint64_t value;
};

/* A table's generator.  Fill it with tab_gen_init(), free it with
 * tab_gen_free(). */
struct tab_gen {
    uint64_t rows;          /* N */
    uint64_t keys;          /* K >= 1 */
    double skew;            /* s >= 0 */
    uint64_t base;          /* the generator's state for row 0 */
    size_t nent;            /* entries of the Zipf table, 0 if uniform */
    uint64_t *thresh;       /* nent - 1 cumulative thresholds of 2^64 */
    uint64_t *lo;           /* nent + 1 bucket starts; lo[nent] = K */
};

/* splitmix64's output function: a bijection of uint64 with good
 * avalanche, the building block of the generator and the checksums. */
uint64_t tab_mix64(uint64_t x);

/* Set up 'g' for table 'id' of 'rows' rows, keys in [0, keys), skew
 * 'skew' and seed 'seed'.  Returns 0, or -1 with errno set (EINVAL: keys
 * is 0 or skew is negative, NaN or infinite; ENOMEM). */
int tab_gen_init(struct tab_gen *g, uint64_t rows, uint64_t keys,
                 double skew, uint64_t seed, unsigned id);

/* Free what tab_gen_init() allocated; 'g' may be zeroed or NULL. */
void tab_gen_free(struct tab_gen *g);

/* Write rows [first, first + n) of the table into out[0..n-1].  The
 * caller keeps first + n <= g->rows. */
void tab_gen_rows(const struct tab_gen *g, uint64_t first, size_t n,
                  struct tab_row *out);

/* The first row of rank 'rank' of 'size' in a table of 'rows' rows:
 * floor(rows * rank / size), without overflow.  Its slice ends where
 * rank + 1's begins. */
uint64_t tab_slice_start(uint64_t rows, int rank, int size);

/* Order of rows: by key, then by value (qsort(3) comparator). */
int tab_row_cmp(const void *a, const void *b);

/* The join's checksum is the sum over joined pairs (l, r), l a left row
 * and r a right row with the same key, of
 * tab_join_left(l) * tab_join_right(r), mod 2^64.  As multiplication
 * distributes over addition mod 2^64, it equals the sum over keys k of
 * A_k * B_k, A_k the sum of tab_join_left() over the left rows of key k
 * and B_k that of tab_join_right() over the right rows: computed that way,
 * it costs a pass over the rows, however many pairs a frequent key
 * makes. */
uint64_t tab_join_left(const struct tab_row *l);
uint64_t tab_join_right(const struct tab_row *r);

/* The sort's checksum is the sum over the sorted table's rows of
 * tab_row_hash(row) * (2i + 1), i the row's position, mod 2^64: it
 * depends on the order, so only the sorted table gives it.  The sum of
 * tab_row_hash() alone is the table's multiset checksum. */
uint64_t tab_row_hash(const struct tab_row *row);

/* Parse a decimal uint64 (no sign, no junk): 0, or -1 with errno set
 * (EINVAL, ERANGE). */
int tab_parse_u64(const char *s, uint64_t *v);

/* Parse a skew: a finite number in [0, 100].  0 or -1 with errno EINVAL. */
int tab_parse_skew(const char *s, double *v);

#endif /* !POOLEX_TABLE_H */
