/* examples/pool/exch.c - what the pool examples share over MPI: the row
 * type, agreeing on errors, the all-to-all shuffle, the output files */
#include "examples/pool/exch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "worker/pilot_fn.h"

int ex_init(struct ex *e, const struct pilot_fn_ctx *ctx, const char *name)
{
    memset(e, 0, sizeof(*e));
    e->name = name;
    e->comm = ctx->comm;
    e->rank = ctx->rank;
    e->size = ctx->size;
    e->row_type = MPI_DATATYPE_NULL;
    const char *v = getenv("POOLEX_VERBOSE");
    e->verbose = v && *v && strcmp(v, "0") != 0;
    e->t0 = MPI_Wtime();
    /* the comm's error handler is the pool's (fatal by default): a
     * failing MPI call does not return here */
    if (MPI_Type_contiguous(2, MPI_UINT64_T, &e->row_type) != MPI_SUCCESS
        || MPI_Type_commit(&e->row_type) != MPI_SUCCESS) {
        fprintf(stderr, "%s: rank %d: cannot make the row type\n", name,
                e->rank);
        return -1;
    }
    return 0;
}

void ex_fini(struct ex *e)
{
    if (e->row_type != MPI_DATATYPE_NULL)
        MPI_Type_free(&e->row_type);
}

void ex_seterr(struct ex *e, const char *fmt, ...)
{
    va_list ap;

    if (e->err[0])
        return;             /* the first is the cause */
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof(e->err), fmt, ap);
    va_end(ap);
}

int ex_failed(struct ex *e)
{
    int mine = e->err[0] ? e->rank : e->size;
    int first;

    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, e->comm);
    if (first == e->size)
        return 0;
    if (first == e->rank) {
        fprintf(stderr, "%s: rank %d: %s\n", e->name, e->rank, e->err);
        fflush(stderr);
    }
    return 1;
}

void ex_phase(const struct ex *e, const char *phase)
{
    if (e->verbose && e->rank == 0)
        fprintf(stderr, "%s: %s %.3f s\n", e->name, phase,
                MPI_Wtime() - e->t0);
}

int ex_shuffle(struct ex *e, const struct tab_row *rows, const int *counts,
               struct tab_row **out, size_t *nout)
{
    int p = e->size;
    int *sdispl = NULL, *rcounts = NULL, *rdispl = NULL;
    struct tab_row *recv = NULL;
    size_t total = 0;

    if (!(sdispl = malloc(p * sizeof(*sdispl)))
        || !(rcounts = malloc(p * sizeof(*rcounts)))
        || !(rdispl = malloc(p * sizeof(*rdispl))))
        ex_seterr(e, "shuffle: out of memory");
    if (ex_failed(e))
        goto error;
    MPI_Alltoall(counts, 1, MPI_INT, rcounts, 1, MPI_INT, e->comm);
    size_t sent = 0;
    for (int d = 0; d < p; d++) {
        sdispl[d] = (int)sent;          /* the caller sends <= INT_MAX */
        sent += (size_t)counts[d];
        rdispl[d] = total <= EX_MAX_ROWS ? (int)total : 0;
        total += (size_t)rcounts[d];
    }
    if (total > EX_MAX_ROWS)
        ex_seterr(e, "shuffle: %zu rows to receive, more than MPI's int "
                  "counts allow (%zu); use more ranks", total, EX_MAX_ROWS);
    else if (!(recv = malloc((total ? total : 1) * sizeof(*recv))))
        ex_seterr(e, "shuffle: out of memory for %zu rows", total);
    if (ex_failed(e))
        goto error;
    MPI_Alltoallv(rows, counts, sdispl, e->row_type, recv, rcounts, rdispl,
                  e->row_type, e->comm);
    free(sdispl);
    free(rcounts);
    free(rdispl);
    *out = recv;
    *nout = total;
    return 0;
error:
    free(sdispl);
    free(rcounts);
    free(rdispl);
    free(recv);
    return -1;
}

/* mkdir -p: 'path' and the directories above it.  0 or -1 with errno. */
static int mkdirs(char *path)
{
    /* each prefix ending before a '/', then the whole; another rank may
     * make any of them first */
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        int rc = mkdir(path, 0777);
        *p = c;
        if (rc < 0 && errno != EEXIST)
            return -1;
        if (c == '\0')
            return 0;
    }
}

FILE *ex_part_open(struct ex *e, const char *outdir)
{
    char path[4096];
    FILE *f;

    if (snprintf(path, sizeof(path), "%s", outdir) >= (int)sizeof(path)
        || !*outdir) {
        ex_seterr(e, "OUTDIR '%s': empty or too long", outdir);
        return NULL;
    }
    /* every rank makes it, as the ranks need not share a node; on a
     * shared file system all but one find it there */
    if (mkdirs(path) < 0) {
        ex_seterr(e, "mkdir %s: %s", path, strerror(errno));
        return NULL;
    }
    if (snprintf(path, sizeof(path), "%s/part-%d", outdir, e->rank)
        >= (int)sizeof(path)) {
        ex_seterr(e, "%s: path too long", outdir);
        return NULL;
    }
    if (!(f = fopen(path, "wb"))) {
        ex_seterr(e, "%s: %s", path, strerror(errno));
        return NULL;
    }
    return f;
}

int ex_part_close(struct ex *e, FILE *f, const char *outdir)
{
    /* ferror() first: fclose() does not report an earlier failed write */
    int bad = ferror(f);
    int saved = errno;

    if (fclose(f) != 0 && !bad) {
        bad = 1;
        saved = errno;
    }
    if (bad) {
        ex_seterr(e, "%s/part-%d: write: %s", outdir, e->rank,
                  strerror(saved));
        return -1;
    }
    return 0;
}
