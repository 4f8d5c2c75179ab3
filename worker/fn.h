/* worker/fn.h - C functions of a pool: "LIB.so:SYMBOL" to a pointer,
 * each library loaded once per worker */
#ifndef PL_WORKER_FN_H
#define PL_WORKER_FN_H

#include "proto/error.h"
#include "worker/pilot_fn.h"

struct pl_fns;

/* An empty cache of libraries, or NULL (ENOMEM). */
struct pl_fns *pl_fns_new(void);
/* Free the cache (accepts NULL, preserves errno).  N.B. the libraries
 * stay loaded: see pl_fns_get(). */
void pl_fns_free(struct pl_fns *f);

/* The function 'spec' names: "LIB:SYMBOL", split at the last ':'.  A LIB
 * with a '/' is a path, relative to 'cwd' (NULL: the worker's own
 * directory); one without is first looked for in 'cwd', then, if there
 * is no such file there, left to dlopen()'s search (LD_LIBRARY_PATH,
 * the system's directories), as "libm.so.6:cos" would be.
 * Each library is dlopen()ed (RTLD_NOW | RTLD_LOCAL) once per worker,
 * the first time a call names it, keyed by its real path, and stays
 * loaded until the worker ends: its code may have left threads, atexit
 * handlers or static state behind that dlclose() would pull from under
 * them.  So a library rebuilt at the same path is not seen by a running
 * pool: name the new one by another path, or restart the pool.
 * Returns the function, or NULL with errp (the dlerror() text; errno
 * ENOENT: no library, ESRCH: no symbol, EINVAL: not LIB:SYMBOL). */
pilot_fn_t *pl_fns_get(struct pl_fns *f, const char *spec, const char *cwd,
                       struct pl_error *errp);

#endif /* !PL_WORKER_FN_H */
