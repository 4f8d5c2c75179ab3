/* examples/pool/exch.h - what the pool examples share over MPI: the row
 * type, agreeing on errors, the all-to-all shuffle, the output files
 *
 * Every call here that says "collective" must be made by every rank of
 * the communicator, in the same order.  An error one rank meets (no
 * memory, a file it cannot write) is kept with ex_seterr() and turned
 * into a decision of all ranks by ex_failed(), so no rank enters a
 * collective that another has left.
 */
#ifndef POOLEX_EXCH_H
#define POOLEX_EXCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <mpi.h>

#include "examples/pool/table.h"

struct pilot_fn_ctx;

struct ex {
    const char *name;       /* "join", "sort": begins every message */
    MPI_Comm comm;          /* borrowed from the task: never freed here */
    int rank;
    int size;
    MPI_Datatype row_type;  /* a struct tab_row: two MPI_UINT64_T */
    int verbose;            /* POOLEX_VERBOSE set: phase times on stderr */
    double t0;              /* MPI_Wtime() at ex_init() */
    char err[256];          /* this rank's first error, "" if none */
};

/* Set up 'e' for function 'name' on ctx->comm.  Returns 0, or -1 (with a
 * message on stderr) if the row type cannot be made. */
int ex_init(struct ex *e, const struct pilot_fn_ctx *ctx, const char *name);

/* Free the row type.  Not collective. */
void ex_fini(struct ex *e);

/* Keep the first error of this rank. */
void ex_seterr(struct ex *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Collective: 0 if no rank has an error; else 1, after the lowest rank
 * with one printed it to stderr. */
int ex_failed(struct ex *e);

/* With POOLEX_VERBOSE set, rank 0 prints "NAME: PHASE T s" to stderr, T
 * the seconds since ex_init(). */
void ex_phase(const struct ex *e, const char *phase);

/* Collective: send counts[d] rows to rank d, the rows for rank 0 first in
 * 'rows', then those for rank 1, and so on (MPI_Alltoall of the counts,
 * MPI_Alltoallv of the rows).  On success *out is a new array of the rows
 * this rank received, in the order of the ranks that sent them (the
 * caller frees it), *nout their number, and 0 is returned; else -1 on
 * every rank, the error reported.  Counts and displacements are ints, so
 * a rank sends and receives at most INT_MAX rows. */
int ex_shuffle(struct ex *e, const struct tab_row *rows, const int *counts,
               struct tab_row **out, size_t *nout);

/* Create 'outdir' if need be and open OUTDIR/part-RANK for writing.
 * Returns the stream, or NULL with the error kept (ex_seterr()). */
FILE *ex_part_open(struct ex *e, const char *outdir);

/* Close a part opened by ex_part_open(), keeping any write error.
 * Returns 0 or -1. */
int ex_part_close(struct ex *e, FILE *f, const char *outdir);

/* The largest integer 'int' holds, as a row count */
#define EX_MAX_ROWS ((size_t)2147483647)

#endif /* !POOLEX_EXCH_H */
