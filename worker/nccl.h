/* worker/nccl.h - NCCL and the CUDA runtime by dlopen(), and a cache of
 * NCCL communicators per group of ranks */
#ifndef PL_WORKER_NCCL_H
#define PL_WORKER_NCCL_H

/* PL_NCCL_NO_MPI: the loader alone, for a program built without MPI
 * (pilot-vetcheck's single-rank nccl check, agent/vetcheck.mk) */
#ifndef PL_NCCL_NO_MPI
#include <mpi.h>
#endif

/* NCCL communicators kept per worker.  Each costs its ranks hundreds of
 * ms to make (a bootstrap over TCP, then the rings), and a pool that
 * runs task after task on the same ranks would pay that every call. */
#define PL_NCCL_CACHE 4

struct pl_nccl;

/* Load the CUDA runtime and NCCL, and make device 0 current (the shim
 * left this rank only its own GPUs in CUDA_VISIBLE_DEVICES).  The
 * libraries: $PILOT_CUDART_LIBRARY, else libcudart.so.13, .12, .so, in
 * the search path then in /usr/local/cuda/lib64; $PILOT_NCCL_LIBRARY,
 * else libnccl.so.2, then /usr/local/cuda/lib64/libnccl.so.2 (either
 * variable set but empty: not used).  Only the symbols the worker calls
 * are looked up, with our own prototypes: no CUDA headers at build time.
 * Whatever fails is not an error of this call: pl_nccl_error() says it.
 * Returns NULL only when out of memory. */
struct pl_nccl *pl_nccl_open(void);
/* Free the cache's memory (accepts NULL, preserves errno).  N.B. the
 * NCCL communicators are not destroyed: ncclCommDestroy() is collective
 * among the ranks of a node, which are not here together; the process
 * is ending and the driver reclaims them. */
void pl_nccl_free(struct pl_nccl *n);

/* NULL when NCCL is ready (both libraries, a device), else why not.
 * Borrowed, valid until pl_nccl_free(). */
const char *pl_nccl_error(const struct pl_nccl *n);
/* What was loaded, for the pool's log ("NCCL 2.27.3 from libnccl.so.2,
 * libcudart.so.13, 1 device").  Borrowed. */
const char *pl_nccl_about(const struct pl_nccl *n);
/* The current CUDA device (0), or -1 when not ready. */
int pl_nccl_device(const struct pl_nccl *n);

/* Use CUDA device 'device' from now on (cudaSetDevice), in place of 0:
 * a program of one rank a GPU among all the node's GPUs (pilot-vetcheck
 * nccl).  Returns 0, or -1 when not ready or the device cannot be set
 * (pl_nccl_error() then says why). */
int pl_nccl_set_device(struct pl_nccl *n, int device);

/* Another function of NCCL, else of the CUDA runtime, by name, for a
 * caller that declares its prototype (pilot-vetcheck nccl: ncclAllReduce,
 * cudaMalloc...).  NULL when neither library has it or they are not
 * loaded. */
void *pl_nccl_sym(const struct pl_nccl *n, const char *name);

/* This rank's vote for a call over world ranks 'group' ('size' of them,
 * in the task's order), to be reduced with MPI_MIN over the task's
 * communicator: 0 not ready (n may be NULL), 1 ready, 2 ready and
 * holding a communicator for exactly this group. */
int pl_nccl_vote(const struct pl_nccl *n, const int *group, int size);

#ifndef PL_NCCL_NO_MPI
/* An ncclComm_t over 'comm' (the task's, rank i of which is world rank
 * group[i]), given 'agreed', the MPI_MIN of every rank's vote.
 * Collective: every rank of 'comm' calls it with the same 'agreed'.
 * 2: every rank uses its cached one.  1: a rank that holds one for the
 * group destroys it (the others do not have it), then all make a new
 * one (rank 0's ncclGetUniqueId sent by MPI_Bcast, ncclCommInitRank,
 * and an MPI_Allreduce of the outcome so that all keep it or none), and
 * cache it; with PL_NCCL_CACHE held, the least recently used is
 * destroyed first.  0: none.
 * Returns the communicator (owned by the cache: the function must not
 * destroy it), or NULL with *why set (borrowed, valid until the next
 * call). */
void *pl_nccl_get(struct pl_nccl *n, MPI_Comm comm, const int *group,
                  int size, int agreed, const char **why);
#endif

#endif /* !PL_WORKER_NCCL_H */
