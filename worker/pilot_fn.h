/* pilot_fn.h - the contract between a pilot pool and the functions it runs
 *
 * A pool task names a function, `--fn LIB.so:SYMBOL`.  Each of the task's
 * ranks calls it in a worker process of the pool (docs/pool.md):
 *
 *     #include <pilot_fn.h>
 *     int join(const struct pilot_fn_ctx *ctx, int argc, char **argv);
 *
 * argv[0] is the function as the task named it ("./libjoin.so:join"),
 * argv[1..argc-1] the task's arguments (after an array's {} was
 * replaced), argv[argc] is NULL.  The return value is the rank's exit
 * code (0..255; others are cut to 255); the task's is the largest of its
 * ranks'.  stdout and stderr go to the rank's output files while the
 * function runs.
 *
 * Use ctx->comm, never MPI_COMM_WORLD: the world is the whole pool, and
 * its other ranks are running other tasks.  The communicator and the
 * NCCL one are the pool's: do not free them.  Do not call MPI_Init,
 * MPI_Finalize or exit(); a crash (a signal) or MPI_Abort takes the
 * pool's MPI job down, and the pool restarts without this task.
 *
 * Versions: a worker fills in every field of its PILOT_FN_VERSION; later
 * versions only add fields at the end.  A function built against version
 * N may read the fields of version N when ctx->version >= N.
 */
#ifndef PILOT_FN_H
#define PILOT_FN_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PILOT_FN_VERSION 1

struct pilot_fn_ctx {
    int version;              /* the worker's PILOT_FN_VERSION */
    int rank;                 /* this rank in 'comm', 0 <= rank < size */
    int size;                 /* the task's ranks */
    MPI_Comm comm;            /* exactly the task's ranks, made for it */
    void *nccl;               /* an ncclComm_t over the same ranks, in the
                                 same order, when the pool has GPUs and
                                 NCCL loaded; else NULL */
    const char *nccl_error;   /* why 'nccl' is NULL (no GPU, no NCCL...),
                                 or NULL */
    int cuda_device;          /* the CUDA device current for this rank,
                                 -1: none */
    unsigned long long task_id;
    unsigned int attempt;     /* 1 for the first */
    long long array_index;    /* the index of an array element, else -1 */
    const char *outdir;       /* the directory of the task's output files */
    const char *pool;         /* the pool's name */
    int world_rank;           /* this worker's rank in the pool */
    int world_size;           /* the pool's workers */
};

/* The type of a pool function. */
typedef int pilot_fn_t(const struct pilot_fn_ctx *ctx, int argc,
                       char **argv);

#ifdef __cplusplus
}
#endif

#endif /* !PILOT_FN_H */
