/* worker/nccl.c - NCCL and the CUDA runtime by dlopen(), and a cache of
 * NCCL communicators per group of ranks */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/nccl.h"

/* Our own declarations of the few calls we make: ncclResult_t and
 * cudaError_t are C enums (ints), ncclComm_t a pointer, and an
 * ncclUniqueId 128 bytes passed by value (nccl.h: NCCL_UNIQUE_ID_BYTES). */
struct nccl_id {
    char internal[128];
};
typedef int nccl_get_unique_id_f(struct nccl_id *id);
typedef int nccl_comm_init_rank_f(void **comm, int nranks, struct nccl_id id,
                                  int rank);
typedef int nccl_comm_destroy_f(void *comm);
typedef const char *nccl_get_error_string_f(int result);
typedef int nccl_get_version_f(int *version);
typedef int cuda_get_device_count_f(int *count);
typedef int cuda_set_device_f(int device);
typedef const char *cuda_get_error_string_f(int error);

struct ncomm {
    int *group;     /* world ranks, the task's order; NULL: a free slot */
    int size;
    void *comm;     /* ncclComm_t */
    uint64_t used;  /* n->clock at the last use */
};

struct pl_nccl {
    void *lib_nccl, *lib_cudart;    /* never closed: see pl_fns_get() */
    nccl_get_unique_id_f *get_unique_id;
    nccl_comm_init_rank_f *comm_init_rank;
    nccl_comm_destroy_f *comm_destroy;
    nccl_get_error_string_f *nccl_error_string;
    cuda_get_device_count_f *get_device_count;
    cuda_set_device_f *set_device;
    cuda_get_error_string_f *cuda_error_string;
    int device;                     /* -1: not ready */
    char error[256];                /* why not ready; "" when ready */
    char about[256];
    char why[256];                  /* the last pl_nccl_get()'s */
    struct ncomm cache[PL_NCCL_CACHE];
    uint64_t clock;
};

/* dlopen() the first of 'names' that loads, or the one $env names (set
 * but empty: none).  The handle, or NULL with n->error set. */
static void *load(struct pl_nccl *n, const char *what, const char *env,
                  const char *const *names, const char **loaded)
{
    const char *over = getenv(env);
    const char *one[] = { over, NULL };
    const char *why = NULL;

    if (over && !*over) {
        snprintf(n->error, sizeof(n->error), "%s is not used (%s is empty)",
                 what, env);
        return NULL;
    }
    if (over)
        names = one;
    for (; *names; names++) {
        void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
        if (h) {
            *loaded = *names;
            return h;
        }
        /* the first failure says most: the later names are fallbacks */
        if (!why)
            why = dlerror();
    }
    snprintf(n->error, sizeof(n->error), "no %s: %s", what,
             why ? why : "not found");
    return NULL;
}

/* dlsym() into a function pointer (POSIX allows the conversion); 0, or
 * -1 with n->error set */
static int sym(struct pl_nccl *n, void *lib, const char *name, void *fnp)
{
    void *p = dlsym(lib, name);

    if (!p) {
        snprintf(n->error, sizeof(n->error), "no %s in the library", name);
        return -1;
    }
    memcpy(fnp, &p, sizeof(p));
    return 0;
}

struct pl_nccl *pl_nccl_open(void)
{
    static const char *const cudarts[] = {
        "libcudart.so.13", "libcudart.so.12", "libcudart.so",
        "/usr/local/cuda/lib64/libcudart.so.13",
        "/usr/local/cuda/lib64/libcudart.so.12",
        "/usr/local/cuda/lib64/libcudart.so", NULL
    };
    static const char *const nccls[] = {
        "libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2", NULL
    };
    const char *cname = NULL, *nname = NULL;
    nccl_get_version_f *get_version = NULL;
    struct pl_nccl *n;
    int count = 0, rc, version = 0;

    if (!(n = calloc(1, sizeof(*n))))
        return NULL;
    n->device = -1;
    if (!(n->lib_cudart = load(n, "CUDA runtime", "PILOT_CUDART_LIBRARY",
                               cudarts, &cname))
        || !(n->lib_nccl = load(n, "NCCL", "PILOT_NCCL_LIBRARY", nccls,
                                &nname)))
        return n;
    if (sym(n, n->lib_cudart, "cudaGetDeviceCount", &n->get_device_count) < 0
        || sym(n, n->lib_cudart, "cudaSetDevice", &n->set_device) < 0
        || sym(n, n->lib_cudart, "cudaGetErrorString", &n->cuda_error_string)
               < 0
        || sym(n, n->lib_nccl, "ncclGetUniqueId", &n->get_unique_id) < 0
        || sym(n, n->lib_nccl, "ncclCommInitRank", &n->comm_init_rank) < 0
        || sym(n, n->lib_nccl, "ncclCommDestroy", &n->comm_destroy) < 0
        || sym(n, n->lib_nccl, "ncclGetErrorString", &n->nccl_error_string)
               < 0)
        return n;
    /* only for the log line: an NCCL without it still works */
    if (sym(n, n->lib_nccl, "ncclGetVersion", &get_version) < 0
        || get_version(&version) != 0)
        version = 0;
    n->error[0] = '\0';
    snprintf(n->about, sizeof(n->about), "NCCL %d.%d.%d from %s, %s",
             version / 10000, version / 100 % 100, version % 100, nname,
             cname);
    if ((rc = n->get_device_count(&count)) != 0) {
        snprintf(n->error, sizeof(n->error), "cudaGetDeviceCount: %s",
                 n->cuda_error_string(rc));
        return n;
    }
    if (count < 1) {
        snprintf(n->error, sizeof(n->error),
                 "cudaGetDeviceCount: no CUDA device visible");
        return n;
    }
    if ((rc = n->set_device(0)) != 0) {
        snprintf(n->error, sizeof(n->error), "cudaSetDevice(0): %s",
                 n->cuda_error_string(rc));
        return n;
    }
    n->device = 0;
    snprintf(n->about + strlen(n->about), sizeof(n->about) - strlen(n->about),
             ", %d device%s visible", count, count == 1 ? "" : "s");
    return n;
}

void pl_nccl_free(struct pl_nccl *n)
{
    int e = errno;

    if (n) {
        for (int i = 0; i < PL_NCCL_CACHE; i++)
            free(n->cache[i].group);
        free(n);
    }
    errno = e;
}

const char *pl_nccl_error(const struct pl_nccl *n)
{
    return n->error[0] ? n->error : NULL;
}

const char *pl_nccl_about(const struct pl_nccl *n)
{
    return n->about;
}

int pl_nccl_device(const struct pl_nccl *n)
{
    return n ? n->device : -1;
}

int pl_nccl_set_device(struct pl_nccl *n, int device)
{
    int rc;

    if (!n || n->error[0])
        return -1;
    if ((rc = n->set_device(device)) != 0) {
        snprintf(n->error, sizeof(n->error), "cudaSetDevice(%d): %s",
                 device, n->cuda_error_string(rc));
        n->device = -1;
        return -1;
    }
    n->device = device;
    return 0;
}

void *pl_nccl_sym(const struct pl_nccl *n, const char *name)
{
    void *p = NULL;

    if (n && n->lib_nccl)
        p = dlsym(n->lib_nccl, name);
    if (!p && n && n->lib_cudart)
        p = dlsym(n->lib_cudart, name);
    return p;
}

static struct ncomm *find(const struct pl_nccl *n, const int *group,
                          int size)
{
    for (int i = 0; i < PL_NCCL_CACHE; i++) {
        const struct ncomm *c = &n->cache[i];
        if (c->group && c->size == size
            && !memcmp(c->group, group, (size_t)size * sizeof(int)))
            return (struct ncomm *)c;
    }
    return NULL;
}

int pl_nccl_vote(const struct pl_nccl *n, const int *group, int size)
{
    if (!n || n->error[0])
        return 0;
    return find(n, group, size) ? 2 : 1;
}

#ifndef PL_NCCL_NO_MPI
/* N.B. NCCL's documentation calls ncclCommDestroy() an intra-node
 * collective; NCCL's code (init.cc, commReclaim) counts the ranks of the
 * communicator in this process, one here.  The other ranks of an
 * evicted group may still hold theirs: they destroy it when a call on
 * that group finds that not all its ranks have one (pl_nccl_get()). */
static void drop(struct pl_nccl *n, struct ncomm *c)
{
    n->comm_destroy(c->comm);
    free(c->group);
    memset(c, 0, sizeof(*c));
}

__attribute__((format(printf, 3, 4)))
static void *fail(struct pl_nccl *n, const char **why, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(n->why, sizeof(n->why), fmt, ap);
    va_end(ap);
    *why = n->why;
    return NULL;
}

void *pl_nccl_get(struct pl_nccl *n, MPI_Comm comm, const int *group,
                  int size, int agreed, const char **why)
{
    struct {
        int rc;
        struct nccl_id id;
    } msg;
    struct ncomm *c, *slot;
    void *nc = NULL;
    int rank, rc, ok, all;
    int *key;

    if (agreed <= 0) {
        if (n && n->error[0])
            return fail(n, why, "%s", n->error);
        if (!n) {
            /* a pool without GPUs never asks; say so if it does */
            static const char none[] = "the pool has no GPUs";
            *why = none;
            return NULL;
        }
        return fail(n, why, "%s", "NCCL is not ready on every rank of "
                                  "the task (see the pool's log)");
    }
    c = find(n, group, size);
    if (agreed >= 2 && c) {
        c->used = ++n->clock;
        return c->comm;
    }
    if (c)
        drop(n, c); /* stale: not every rank of the group has one */
    MPI_Comm_rank(comm, &rank);
    memset(&msg, 0, sizeof(msg));
    if (rank == 0)
        msg.rc = n->get_unique_id(&msg.id);
    MPI_Bcast(&msg, (int)sizeof(msg), MPI_BYTE, 0, comm);
    if (msg.rc != 0)
        return fail(n, why, "ncclGetUniqueId on the task's rank 0: %s",
                    n->nccl_error_string(msg.rc));
    /* a function may have changed the current device of this thread */
    n->set_device(n->device);
    rc = n->comm_init_rank(&nc, size, msg.id, rank);
    ok = rc == 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) {
        if (ok)
            n->comm_destroy(nc);
        if (!ok)
            return fail(n, why, "ncclCommInitRank: %s",
                        n->nccl_error_string(rc));
        return fail(n, why, "%s", "ncclCommInitRank failed on another "
                                  "rank of the task");
    }
    if (!(key = malloc((size_t)size * sizeof(int)))) {
        /* not cached: this one is used once and then leaks, rather than
         * destroyed here without the other ranks */
        return nc;
    }
    memcpy(key, group, (size_t)size * sizeof(int));
    slot = &n->cache[0];
    for (int i = 0; i < PL_NCCL_CACHE; i++) {
        if (!n->cache[i].group) {
            slot = &n->cache[i];
            break;
        }
        if (n->cache[i].used < slot->used)
            slot = &n->cache[i];
    }
    if (slot->group)
        drop(n, slot);
    slot->group = key;
    slot->size = size;
    slot->comm = nc;
    slot->used = ++n->clock;
    return nc;
}
#endif /* !PL_NCCL_NO_MPI */
