/* worker/py.h - Python functions of a pool: "MODULE:FUNCTION" called in
 * an embedded interpreter, with an mpi4py communicator */
#ifndef PL_WORKER_PY_H
#define PL_WORKER_PY_H

#include <stdbool.h>

#include "proto/error.h"
#include "worker/pilot_fn.h"

struct pl_py;

/* Whether this worker was built with Python (python3-embed). */
bool pl_py_built(void);

/* The interpreter, not started yet: pl_py_get() starts it the first
 * time (Py_InitializeEx(0): Python installs no signal handlers, so the
 * worker's crash reports stay), imports mpi4py with rc.initialize and
 * rc.finalize off (the worker owns MPI_Init and MPI_Finalize), and then
 * holds the GIL only while it runs Python.  NULL: out of memory. */
struct pl_py *pl_py_new(void);
/* Accepts NULL, preserves errno.  The interpreter is not finalized: a
 * thread a function left running could hang Py_FinalizeEx(). */
void pl_py_free(struct pl_py *p);

/* The function 'spec' names, "MODULE:FUNCTION" (split at the last ':';
 * FUNCTION may be dotted, "Class.method"), importing MODULE with 'cwd'
 * (NULL: the worker's directory) first on sys.path.  Modules stay
 * imported (sys.modules): a module edited under a running pool is not
 * read again.  Returns a reference for pl_py_call() that the caller
 * releases with pl_py_put(), or NULL with errp (the exception's last
 * line, or why there is no Python) and *tb (NULL, or a malloc'd
 * traceback of the import that the caller frees). */
void *pl_py_get(struct pl_py *p, const char *spec, const char *cwd,
                struct pl_error *errp, char **tb);
void pl_py_put(struct pl_py *p, void *fn);

/* Call fn(ctx, *argv[1:]) where the Python ctx has the attributes comm
 * (an mpi4py Intracomm over ctx->comm, not owned by Python: it is never
 * freed by it), rank, size, task_id, attempt, array_index (None when
 * not an array element), outdir, pool, world_rank, world_size, nccl
 * (None: NCCL communicators are for C functions), nccl_error and
 * cuda_device.  'env' (KEY=VALUE, or NULL) is set in os.environ around
 * the call and 'cwd' is first on sys.path during it.
 * The code: a return of None is 0, an int its value (out of 0..255:
 * 255), anything else 0 with a warning on stderr; SystemExit(n) is n
 * (None: 0; not an int: printed, 1); any other exception prints its
 * traceback on stderr and is 1.  sys.stdout and sys.stderr are flushed
 * before it returns.  *freed is set when the function freed ctx.comm
 * (comm.Free()): the caller must not free it again. */
int pl_py_call(struct pl_py *p, void *fn, const char *spec,
               const struct pilot_fn_ctx *ctx, char **argv, char **env,
               const char *cwd, bool *freed);

/* Flush sys.stdout and sys.stderr, if the interpreter is started. */
void pl_py_flush(struct pl_py *p);

#endif /* !PL_WORKER_PY_H */
