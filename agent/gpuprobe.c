/* agent/gpuprobe.c - this node's GPUs as NVML or the CUDA driver sees
 * them (dlopen at run time), cross-checked with Slurm's grant
 *
 * There is no NVML or CUDA header at build time and no link to either:
 * the few types and prototypes used are declared here, from nvml.h (NVML
 * API reference) and cuda.h (CUDA driver API).  On Linux both APIs use
 * the C calling convention; nvmlReturn_t and CUresult are enums (int),
 * CUdevice is an int, and nvmlDevice_t is a pointer to an opaque struct.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/gpuprobe.h"
#include "proto/strv.h"

#define MAX_GPUS 64 /* more than any node has; further ones are ignored */

struct pl_gpuprobe {
    enum pl_gpuprobe_lib lib;
    char reason[512];
    struct pl_gpuprobe_dev devs[MAX_GPUS];
    size_t ndevs;
};

/* nvml.h */
#define NVML_SUCCESS 0

struct nvml_device;  /* what an nvmlDevice_t points to */
struct nvml_memory { /* nvmlMemory_t */
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};

typedef int (*nvml_init_f)(void);
typedef int (*nvml_shutdown_f)(void);
typedef int (*nvml_count_f)(unsigned int *count);
typedef int (*nvml_handle_f)(unsigned int index, struct nvml_device **dev);
typedef int (*nvml_string_f)(struct nvml_device *dev, char *buf,
                             unsigned int len);
typedef int (*nvml_memory_f)(struct nvml_device *dev, struct nvml_memory *m);
typedef int (*nvml_minor_f)(struct nvml_device *dev, unsigned int *minor);
typedef const char *(*nvml_error_f)(int rc);

struct nvml {
    nvml_init_f init;         /* nvmlInit_v2 */
    nvml_shutdown_f shutdown; /* nvmlShutdown */
    nvml_count_f count;       /* nvmlDeviceGetCount_v2 */
    nvml_handle_f handle;     /* nvmlDeviceGetHandleByIndex_v2 */
    nvml_string_f uuid;       /* nvmlDeviceGetUUID, optional */
    nvml_string_f name;       /* nvmlDeviceGetName, optional */
    nvml_memory_f memory;     /* nvmlDeviceGetMemoryInfo, optional */
    nvml_minor_f minor;       /* nvmlDeviceGetMinorNumber, optional */
    nvml_error_f error;       /* nvmlErrorString, optional */
};

/* cuda.h */
#define CUDA_SUCCESS 0

struct cuda_uuid { /* CUuuid */
    unsigned char bytes[16];
};

typedef int (*cuda_init_f)(unsigned int flags);
typedef int (*cuda_count_f)(int *count);
typedef int (*cuda_get_f)(int *dev, int ordinal);
typedef int (*cuda_name_f)(char *name, int len, int dev);
typedef int (*cuda_uuid_f)(struct cuda_uuid *uuid, int dev);
typedef int (*cuda_mem_f)(size_t *bytes, int dev);
typedef int (*cuda_error_f)(int rc, const char **name);

struct cuda {
    cuda_init_f init;   /* cuInit */
    cuda_count_f count; /* cuDeviceGetCount */
    cuda_get_f get;     /* cuDeviceGet */
    cuda_name_f name;   /* cuDeviceGetName, optional */
    cuda_uuid_f uuid;   /* cuDeviceGetUuid_v2, else cuDeviceGetUuid;
                           optional */
    cuda_mem_f mem;     /* cuDeviceTotalMem_v2, optional */
    cuda_error_f error; /* cuGetErrorName, optional */
};

/* Append "; " (unless at the start) and a formatted note to p->reason;
 * a reason that does not fit is cut. */
__attribute__((format(printf, 2, 3)))
static void why(struct pl_gpuprobe *p, const char *fmt, ...)
{
    size_t off = strlen(p->reason);
    va_list ap;

    if (off > 0 && off + 2 < sizeof(p->reason)) {
        memcpy(p->reason + off, "; ", 3);
        off += 2;
    }
    va_start(ap, fmt);
    vsnprintf(p->reason + off, sizeof(p->reason) - off, fmt, ap);
    va_end(ap);
}

/* Why dlopen() of 'path' failed, into p->reason.  Returns -1. */
static int not_loaded(struct pl_gpuprobe *p, const char *path)
{
    const char *e = dlerror(); /* names the file */

    if (e)
        why(p, "%s", e);
    else
        why(p, "%s: cannot be loaded", path);
    return -1;
}

/* dlsym(), NULL if 'name' is not in 'lib'.  N.B. POSIX (dlsym(3)) lets
 * the void * be taken as a function pointer; ISO C does not, so this
 * file does not build with -Wpedantic. */
static void *sym(void *lib, const char *name)
{
    return dlsym(lib, name);
}

/* NVML's name for 'rc'. */
static const char *nvml_strerror(const struct nvml *api, int rc)
{
    const char *s = api->error ? api->error(rc) : NULL;

    return s ? s : "unknown error";
}

/* Copy what NVML says of its device 'i' into 'd'.  Returns 0, or -1 with
 * NVML's code in *rc if it has no handle for it
 * (NVML_ERROR_NO_PERMISSION: a GPU our device cgroup denies). */
static int nvml_device(const struct nvml *api, unsigned int i,
                       struct pl_gpuprobe_dev *d, int *rc)
{
    struct nvml_device *dev = NULL;
    struct nvml_memory mem;
    unsigned int minor;

    if ((*rc = api->handle(i, &dev)) != NVML_SUCCESS)
        return -1;
    memset(d, 0, sizeof(*d));
    d->index = (int)i;
    d->minor = -1;
    if (api->minor && api->minor(dev, &minor) == NVML_SUCCESS)
        d->minor = (int)minor;
    /* 96 bytes: NVML_DEVICE_UUID_V2_BUFFER_SIZE, _NAME_V2_BUFFER_SIZE */
    if (!api->uuid || api->uuid(dev, d->uuid, sizeof(d->uuid)) != NVML_SUCCESS)
        d->uuid[0] = '\0';
    if (!api->name || api->name(dev, d->name, sizeof(d->name)) != NVML_SUCCESS)
        d->name[0] = '\0';
    d->uuid[sizeof(d->uuid) - 1] = '\0';
    d->name[sizeof(d->name) - 1] = '\0';
    if (api->memory && api->memory(dev, &mem) == NVML_SUCCESS)
        d->memory = mem.total;
    return 0;
}

/* List the GPUs with NVML from 'path'.  Returns 0, or -1 with the reason
 * added to p->reason. */
static int probe_nvml(struct pl_gpuprobe *p, const char *path)
{
    struct nvml api;
    void *lib;
    unsigned int n = 0;
    int rc = NVML_SUCCESS;
    bool up = false;

    if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
        return not_loaded(p, path);
    api = (struct nvml){
        .init = (nvml_init_f)sym(lib, "nvmlInit_v2"),
        .shutdown = (nvml_shutdown_f)sym(lib, "nvmlShutdown"),
        .count = (nvml_count_f)sym(lib, "nvmlDeviceGetCount_v2"),
        .handle = (nvml_handle_f)sym(lib, "nvmlDeviceGetHandleByIndex_v2"),
        .uuid = (nvml_string_f)sym(lib, "nvmlDeviceGetUUID"),
        .name = (nvml_string_f)sym(lib, "nvmlDeviceGetName"),
        .memory = (nvml_memory_f)sym(lib, "nvmlDeviceGetMemoryInfo"),
        .minor = (nvml_minor_f)sym(lib, "nvmlDeviceGetMinorNumber"),
        .error = (nvml_error_f)sym(lib, "nvmlErrorString"),
    };
    if (!api.init || !api.shutdown || !api.count || !api.handle) {
        why(p, "%s: not NVML (no nvmlInit_v2, nvmlShutdown, "
            "nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2)", path);
        goto error;
    }
    /* NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_LIB_RM_VERSION_MISMATCH
     * (library and kernel module of different drivers), ... */
    if ((rc = api.init()) != NVML_SUCCESS) {
        why(p, "%s: nvmlInit_v2: %s (%d)", path, nvml_strerror(&api, rc), rc);
        goto error;
    }
    up = true;
    if ((rc = api.count(&n)) != NVML_SUCCESS) {
        why(p, "%s: nvmlDeviceGetCount_v2: %s (%d)", path,
            nvml_strerror(&api, rc), rc);
        goto error;
    }
    for (unsigned int i = 0; i < n && p->ndevs < MAX_GPUS; i++)
        if (nvml_device(&api, i, &p->devs[p->ndevs], &rc) == 0)
            p->ndevs++;
    if (p->ndevs == 0) {
        if (n == 0)
            why(p, "%s: NVML sees no GPU", path);
        else
            why(p, "%s: NVML cannot open any of its %u GPUs "
                "(nvmlDeviceGetHandleByIndex_v2: %s (%d))", path, n,
                nvml_strerror(&api, rc), rc);
        goto error;
    }
    api.shutdown();
    dlclose(lib);
    p->lib = PL_GPUPROBE_NVML;
    return 0;
error:
    if (up)
        api.shutdown();
    dlclose(lib);
    p->ndevs = 0;
    return -1;
}

/* CUDA's name for 'rc': cuGetErrorName() where it answers (the stub does
 * not), else the codes a probe meets, from cuda.h. */
static const char *cuda_strerror(const struct cuda *api, int rc)
{
    const char *s = NULL;

    if (api->error && api->error(rc, &s) == CUDA_SUCCESS && s)
        return s;
    switch (rc) {
    case 3:
        return "CUDA_ERROR_NOT_INITIALIZED";
    case 34:
        return "CUDA_ERROR_STUB_LIBRARY";
    case 35:
        return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 100:
        return "CUDA_ERROR_NO_DEVICE";
    case 101:
        return "CUDA_ERROR_INVALID_DEVICE";
    case 803:
        return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    default:
        return "unknown error";
    }
}

/* Copy what the CUDA driver says of its ordinal 'i' into 'd'.  Returns 0,
 * or -1 with the driver's code in *rc if it has no device for it. */
static int cuda_device(const struct cuda *api, int i,
                       struct pl_gpuprobe_dev *d, int *rc)
{
    struct cuda_uuid u;
    size_t bytes;
    int dev;

    if ((*rc = api->get(&dev, i)) != CUDA_SUCCESS)
        return -1;
    memset(d, 0, sizeof(*d));
    d->index = i;
    d->minor = -1;
    if (!api->name
        || api->name(d->name, (int)sizeof(d->name), dev) != CUDA_SUCCESS)
        d->name[0] = '\0';
    d->name[sizeof(d->name) - 1] = '\0';
    if (api->mem && api->mem(&bytes, dev) == CUDA_SUCCESS)
        d->memory = bytes;
    /* written the way NVML and nvidia-smi write it */
    if (api->uuid && api->uuid(&u, dev) == CUDA_SUCCESS) {
        const unsigned char *b = u.bytes;
        snprintf(d->uuid, sizeof(d->uuid),
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                 "%02x%02x%02x%02x%02x%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
                 b[10], b[11], b[12], b[13], b[14], b[15]);
    }
    return 0;
}

/* List the GPUs with the CUDA driver from 'path'.  Returns 0, or -1 with
 * the reason added to p->reason.
 * N.B. RTLD_NODELETE: nothing undoes cuInit(), and unmapping the driver
 * under what it has set up is not safe. */
static int probe_cuda(struct pl_gpuprobe *p, const char *path)
{
    struct cuda api;
    void *lib;
    int n = 0;
    int rc = CUDA_SUCCESS;

    if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)))
        return not_loaded(p, path);
    api = (struct cuda){
        .init = (cuda_init_f)sym(lib, "cuInit"),
        .count = (cuda_count_f)sym(lib, "cuDeviceGetCount"),
        .get = (cuda_get_f)sym(lib, "cuDeviceGet"),
        .name = (cuda_name_f)sym(lib, "cuDeviceGetName"),
        .uuid = (cuda_uuid_f)sym(lib, "cuDeviceGetUuid_v2"),
        .mem = (cuda_mem_f)sym(lib, "cuDeviceTotalMem_v2"),
        .error = (cuda_error_f)sym(lib, "cuGetErrorName"),
    };
    if (!api.uuid)
        api.uuid = (cuda_uuid_f)sym(lib, "cuDeviceGetUuid");
    if (!api.init || !api.count || !api.get) {
        why(p, "%s: not the CUDA driver (no cuInit, cuDeviceGetCount or "
            "cuDeviceGet)", path);
        goto error;
    }
    /* CUDA_ERROR_STUB_LIBRARY from the toolkit's stub, CUDA_ERROR_NO_DEVICE,
     * CUDA_ERROR_INSUFFICIENT_DRIVER, ... */
    if ((rc = api.init(0)) != CUDA_SUCCESS) {
        why(p, "%s: cuInit: %s (%d)", path, cuda_strerror(&api, rc), rc);
        goto error;
    }
    if ((rc = api.count(&n)) != CUDA_SUCCESS) {
        why(p, "%s: cuDeviceGetCount: %s (%d)", path,
            cuda_strerror(&api, rc), rc);
        goto error;
    }
    for (int i = 0; i < n && p->ndevs < MAX_GPUS; i++)
        if (cuda_device(&api, i, &p->devs[p->ndevs], &rc) == 0)
            p->ndevs++;
    if (p->ndevs == 0) {
        if (n <= 0)
            why(p, "%s: the CUDA driver sees no GPU", path);
        else
            why(p, "%s: cuDeviceGet: %s (%d) for each of its %d GPUs", path,
                cuda_strerror(&api, rc), rc, n);
        goto error;
    }
    dlclose(lib);
    p->lib = PL_GPUPROBE_CUDA;
    return 0;
error:
    dlclose(lib);
    p->ndevs = 0;
    return -1;
}

/* The probe itself, into 'p' (zeroed). */
static void probe(struct pl_gpuprobe *p, const struct pl_gpuprobe_spec *spec)
{
    const char *nvml = spec && spec->nvml_library ? spec->nvml_library
                                                  : "libnvidia-ml.so.1";
    const char *cuda = spec && spec->cuda_library ? spec->cuda_library
                                                  : "libcuda.so.1";
    char failed[sizeof(p->reason)];

    if (!*nvml)
        why(p, "NVML skipped (PILOT_NVML_LIBRARY is empty)");
    else if (probe_nvml(p, nvml) == 0) {
        snprintf(p->reason, sizeof(p->reason), "NVML (%.300s)", nvml);
        return;
    }
    if (!*cuda)
        why(p, "CUDA driver skipped (PILOT_CUDA_LIBRARY is empty)");
    else if (probe_cuda(p, cuda) == 0) {
        snprintf(failed, sizeof(failed), "%s", p->reason);
        snprintf(p->reason, sizeof(p->reason), "the CUDA driver (%.150s), "
                 "without NVML: %.300s", cuda, failed);
        return;
    }
    p->lib = PL_GPUPROBE_NONE;
}

/* N.B. the probe runs in a child process, which hands back the plain
 * struct through a pipe: the CUDA driver cannot be unloaded once
 * cuInit() ran (its threads and device files would stay in the agent,
 * and the files in every task it spawns), and a library that crashes
 * takes only the child with it. */
struct pl_gpuprobe *pl_gpuprobe_new(const struct pl_gpuprobe_spec *spec)
{
    struct pl_gpuprobe *p;
    int fds[2];
    pid_t pid;
    int status;
    size_t got = 0;

    if (!(p = calloc(1, sizeof(*p)))) {
        errno = ENOMEM;
        return NULL;
    }
    if (pipe2(fds, O_CLOEXEC) < 0) {
        why(p, "GPU probe: pipe: %s", strerror(errno));
        return p;
    }
    fflush(NULL);
    if ((pid = fork()) < 0) {
        why(p, "GPU probe: fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return p;
    }
    if (pid == 0) {
        close(fds[0]);
        probe(p, spec);
        const char *b = (const char *)p;
        size_t off = 0;
        while (off < sizeof(*p)) {
            ssize_t n = write(fds[1], b + off, sizeof(*p) - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                _exit(1);
            off += (size_t)n;
        }
        _exit(0);
    }
    close(fds[1]);
    while (got < sizeof(*p)) {
        ssize_t n = read(fds[0], (char *)p + got, sizeof(*p) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fds[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got != sizeof(*p)) {
        memset(p, 0, sizeof(*p));
        if (WIFSIGNALED(status))
            why(p, "GPU probe: killed by signal %d", WTERMSIG(status));
        else
            why(p, "GPU probe: no answer (exit %d)", WEXITSTATUS(status));
    }
    p->reason[sizeof(p->reason) - 1] = '\0';
    if (p->ndevs > MAX_GPUS || p->lib > PL_GPUPROBE_CUDA) {
        memset(p, 0, sizeof(*p));
        why(p, "GPU probe: bad answer");
    }
    return p;
}

void pl_gpuprobe_free(struct pl_gpuprobe *p)
{
    if (p) {
        int saved = errno;
        free(p);
        errno = saved;
    }
}

enum pl_gpuprobe_lib pl_gpuprobe_lib(const struct pl_gpuprobe *p)
{
    return p->lib;
}

const char *pl_gpuprobe_reason(const struct pl_gpuprobe *p)
{
    return p->reason;
}

const struct pl_gpuprobe_dev *pl_gpuprobe_devs(const struct pl_gpuprobe *p,
                                               size_t *n)
{
    *n = p->ndevs;
    return p->devs;
}

const char *pl_gpuprobe_lib_name(enum pl_gpuprobe_lib lib)
{
    switch (lib) {
    case PL_GPUPROBE_NVML:
        return "NVML";
    case PL_GPUPROBE_CUDA:
        return "the CUDA driver";
    default:
        return "no GPU library";
    }
}

static bool is_uuid(const char *s)
{
    return !strncmp(s, "GPU-", 4) || !strncmp(s, "MIG-", 4);
}

/* The value of a plain decimal id ("3"), or -1 if 's' is not one. */
static long number(const char *s)
{
    char *end;
    long v;

    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v > 1000000)
        return -1;
    return v;
}

/* Which of 'devs' is granted GPU 'pos', Slurm's 'id' (the rules are in
 * gpuprobe.h).  Its index in 'devs', or -1. */
static long find(enum pl_gpuprobe_lib lib, const struct pl_gpuprobe_dev *devs,
                 size_t ndevs, const char *id, size_t pos, unsigned flags)
{
    bool by_pos = lib == PL_GPUPROBE_CUDA
                  && (flags & PL_GPUPROBE_CUDA_VISIBLE);
    bool by_uuid = !by_pos && is_uuid(id);
    bool by_minor = lib == PL_GPUPROBE_NVML && (flags & PL_GPUPROBE_SLURM_IDS);
    long want = by_pos ? (long)pos : number(id);

    if (!by_uuid && want < 0)
        return -1;
    for (size_t k = 0; k < ndevs; k++) {
        const struct pl_gpuprobe_dev *d = &devs[k];
        if (by_uuid ? !strcmp(d->uuid, id)
                    : (by_minor ? d->minor : d->index) == want)
            return (long)k;
    }
    return -1;
}

/* How find() matched, for the warning. */
static const char *how(enum pl_gpuprobe_lib lib, unsigned flags)
{
    if (lib == PL_GPUPROBE_NVML)
        return flags & PL_GPUPROBE_SLURM_IDS ? "id N = minor of /dev/nvidiaN"
                                             : "by NVML index or UUID";
    return flags & PL_GPUPROBE_CUDA_VISIBLE
               ? "by position in CUDA_VISIBLE_DEVICES"
               : "by CUDA ordinal or UUID";
}

size_t pl_gpuprobe_check(enum pl_gpuprobe_lib lib,
                         const struct pl_gpuprobe_dev *devs, size_t ndevs,
                         char *const *ids, unsigned flags, long *match,
                         struct pl_error *msg)
{
    size_t n = pl_strv_len(ids);
    size_t found = 0;
    char missing[48]; /* the ids not found, "1,5", cut with "..." */
    size_t off = 0;

    pl_errprintf(msg, "%s", "");
    for (size_t i = 0; i < n; i++) {
        if (lib == PL_GPUPROBE_NONE) {
            match[i] = -1;
            found++;
            continue;
        }
        if ((match[i] = find(lib, devs, ndevs, ids[i], i, flags)) >= 0) {
            found++;
            continue;
        }
        if (off < sizeof(missing)) {
            int w = snprintf(missing + off, sizeof(missing) - off, "%s%s",
                             off ? "," : "", ids[i]);
            if (w < 0 || (size_t)w >= sizeof(missing) - off) {
                memcpy(missing + sizeof(missing) - 4, "...", 4);
                off = sizeof(missing);
            }
            else
                off += (size_t)w;
        }
    }
    if (found < n)
        pl_errprintf(msg, "%s GPU%s %s but %s has no such GPU (%s): not "
                     "using %s", flags & PL_GPUPROBE_SLURM_IDS
                                     ? "Slurm granted"
                                     : "CUDA_VISIBLE_DEVICES names",
                     n - found > 1 ? "s" : "", missing,
                     pl_gpuprobe_lib_name(lib), how(lib, flags),
                     n - found > 1 ? "them" : "it");
    else if (n == 0 && ndevs > 0 && lib != PL_GPUPROBE_NONE)
        pl_errprintf(msg, "%s sees %zu GPU%s but Slurm granted none: using "
                     "none (not ours)", pl_gpuprobe_lib_name(lib), ndevs,
                     ndevs > 1 ? "s" : "");
    return found;
}
