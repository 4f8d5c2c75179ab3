/* bench/poolfn.c - the pool functions of the benchmark's scenario 6
 *
 * stamp: prints "entered RANK EPOCH", the CLOCK_REALTIME at which this
 * rank entered the function, then one MPI_Barrier on the task's
 * communicator, so that no rank returns before every rank is in.
 * noop: returns 0 at once.
 *
 * Both run in a pool (--fn LIB.so:SYM) and, unchanged, as a plain MPI
 * program (pilot-worker --once LIB.so:SYM): bench/pool.py times the
 * same function both ways.
 */
#include <stdio.h>
#include <time.h>

#include "pilot_fn.h"

int stamp(const struct pilot_fn_ctx *ctx, int argc, char **argv);
int noop(const struct pilot_fn_ctx *ctx, int argc, char **argv);

int stamp(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    struct timespec ts;

    /* first thing: the clock is what is measured */
    clock_gettime(CLOCK_REALTIME, &ts);
    (void)argc;
    (void)argv;
    printf("entered %d %lld.%09ld\n", ctx->rank, (long long)ts.tv_sec,
           ts.tv_nsec);
    fflush(stdout);
    MPI_Barrier(ctx->comm);
    return 0;
}

int noop(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    (void)ctx;
    (void)argc;
    (void)argv;
    return 0;
}
