/* agent/vetcheck_gpu.c - pilot-vetcheck gpu: this node's GPUs through
 * NVML (count, memory, temperature, remapped rows) and a CUDA kernel
 * through the driver API, both loaded with dlopen()
 *
 * No NVML or CUDA header at build time: the few prototypes are declared
 * here from nvml.h and cuda.h, as agent/gpuprobe.c does (nvmlReturn_t
 * and CUresult are ints, CUdevice an int, the handles pointers).  The
 * kernel is PTX written by hand (pl_vet_ptx), which the driver compiles
 * for whatever GPU it finds; tests/e2e/t1250-vetcheck.sh assembles it
 * with ptxas for sm_80 and sm_90.
 */
#include <dlfcn.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/vetcheck.h"

#define MAX_GPUS 64

/* y[i] = a * x[i] + b for i < n, one thread an element.  PTX ISA 7.8
 * (CUDA 11.8, drivers 520 and later), sm_75: every GPU the driver of an
 * A100, H100 or H200 runs JITs it.  fma.rn: one rounding, as C's fmaf(),
 * so the host checks every element for equality. */
const char pl_vet_ptx[] =
    ".version 7.8\n"
    ".target sm_75\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry pl_vet_axpb(\n"
    "    .param .u64 pl_vet_axpb_x,\n"
    "    .param .u64 pl_vet_axpb_y,\n"
    "    .param .f32 pl_vet_axpb_a,\n"
    "    .param .f32 pl_vet_axpb_b,\n"
    "    .param .u32 pl_vet_axpb_n\n"
    ")\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b32 %r<6>;\n"
    "    .reg .f32 %f<5>;\n"
    "    .reg .b64 %rd<8>;\n"
    "\n"
    "    ld.param.u64 %rd1, [pl_vet_axpb_x];\n"
    "    ld.param.u64 %rd2, [pl_vet_axpb_y];\n"
    "    ld.param.f32 %f1, [pl_vet_axpb_a];\n"
    "    ld.param.f32 %f2, [pl_vet_axpb_b];\n"
    "    ld.param.u32 %r1, [pl_vet_axpb_n];\n"
    "    mov.u32 %r2, %ctaid.x;\n"
    "    mov.u32 %r3, %ntid.x;\n"
    "    mov.u32 %r4, %tid.x;\n"
    "    mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "    setp.ge.u32 %p1, %r5, %r1;\n"
    "    @%p1 bra DONE;\n"
    "    cvta.to.global.u64 %rd3, %rd1;\n"
    "    cvta.to.global.u64 %rd4, %rd2;\n"
    "    mul.wide.u32 %rd5, %r5, 4;\n"
    "    add.s64 %rd6, %rd3, %rd5;\n"
    "    add.s64 %rd7, %rd4, %rd5;\n"
    "    ld.global.f32 %f3, [%rd6];\n"
    "    fma.rn.f32 %f4, %f1, %f3, %f2;\n"
    "    st.global.f32 [%rd7], %f4;\n"
    "DONE:\n"
    "    ret;\n"
    "}\n";

/* nvml.h */
struct nvml_device;
struct nvml_memory {
    unsigned long long total, free, used;
};
struct nvml {
    int (*init)(void);                              /* nvmlInit_v2 */
    int (*shutdown)(void);                          /* nvmlShutdown */
    int (*count)(unsigned int *n);                  /* ..GetCount_v2 */
    int (*handle)(unsigned int i, struct nvml_device **d); /* ..Index_v2 */
    int (*uuid)(struct nvml_device *d, char *buf, unsigned int len);
    int (*name)(struct nvml_device *d, char *buf, unsigned int len);
    int (*memory)(struct nvml_device *d, struct nvml_memory *m);
    int (*temp)(struct nvml_device *d, int sensor, unsigned int *c);
    int (*remapped)(struct nvml_device *d, unsigned int *corr,
                    unsigned int *unc, unsigned int *pending,
                    unsigned int *failed); /* optional (Ampere and later) */
    int (*driver)(char *buf, unsigned int len); /* optional */
    const char *(*error)(int rc);
};
#define NVML_TEMPERATURE_GPU 0

/* cuda.h */
typedef unsigned long long cu_ptr; /* CUdeviceptr */
struct cu_uuid {
    unsigned char bytes[16];
};
struct cuda {
    int (*init)(unsigned int flags);            /* cuInit */
    int (*version)(int *v);                     /* cuDriverGetVersion */
    int (*count)(int *n);                       /* cuDeviceGetCount */
    int (*get)(int *dev, int ordinal);          /* cuDeviceGet */
    int (*uuid)(struct cu_uuid *u, int dev);    /* cuDeviceGetUuid(_v2) */
    int (*retain)(void **ctx, int dev);         /* cuDevicePrimaryCtxRetain */
    int (*release)(int dev);                    /* ..PrimaryCtxRelease_v2 */
    int (*set_current)(void *ctx);              /* cuCtxSetCurrent */
    int (*load)(void **mod, const void *image, unsigned int nopt, int *opts,
                void **vals);                   /* cuModuleLoadDataEx */
    int (*unload)(void *mod);                   /* cuModuleUnload */
    int (*function)(void **fn, void *mod, const char *name);
    int (*alloc)(cu_ptr *p, size_t bytes);      /* cuMemAlloc_v2 */
    int (*free)(cu_ptr p);                      /* cuMemFree_v2 */
    int (*htod)(cu_ptr dst, const void *src, size_t bytes); /* _v2 */
    int (*dtoh)(void *dst, cu_ptr src, size_t bytes);       /* _v2 */
    int (*launch)(void *fn, unsigned int gx, unsigned int gy,
                  unsigned int gz, unsigned int bx, unsigned int by,
                  unsigned int bz, unsigned int shared, void *stream,
                  void **params, void **extra); /* cuLaunchKernel */
    int (*sync)(void);                          /* cuCtxSynchronize */
    int (*error)(int rc, const char **name);    /* cuGetErrorName */
};
#define CU_JIT_ERROR_LOG_BUFFER 5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

struct opts {
    long expect;       /* -1: not checked */
    double min_free_mb;
    double min_free_pct;
    double max_temp;
    double min_kernel_gbs;
    unsigned int n;    /* the kernel's elements */
};

/* One visible GPU: NVML's index, and its part of the report. */
struct gpu {
    unsigned int nvml;
    char uuid[96];
    json_t *o; /* borrowed from the report's "gpus" */
};

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* dlsym() into a function pointer (dlsym(3) allows it).  0, or -1. */
static int sym(void *lib, const char *name, void *fnp)
{
    void *p = dlsym(lib, name);

    memcpy(fnp, &p, sizeof(p));
    return p ? 0 : -1;
}

static const char *nvml_err(const struct nvml *api, int rc)
{
    const char *s = api->error ? api->error(rc) : NULL;

    return s ? s : "unknown NVML error";
}

static const char *cu_err(const struct cuda *cu, int rc)
{
    const char *s = NULL;

    if (!cu->error || cu->error(rc, &s) != 0 || !s)
        return "unknown CUDA error";
    return s;
}

/* Load NVML: 0, or -1 after pl_vet_cannot(). */
static int nvml_load(struct pl_vet *v, struct nvml *api, void **libp)
{
    const char *path = getenv("PILOT_NVML_LIBRARY");
    void *lib;

    if (path && !*path) {
        /* node vetting passes a node with no NVML at all (docs) */
        json_object_set_new(v->out, "no_nvml", json_true());
        pl_vet_cannot(v, "no GPU here: NVML is not used "
                         "(PILOT_NVML_LIBRARY is empty)");
        return -1;
    }
    if (!path)
        path = "libnvidia-ml.so.1";
    if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
        json_object_set_new(v->out, "no_nvml", json_true());
        pl_vet_cannot(v, "no GPU here: NVML not found (%s)", dlerror());
        return -1;
    }
    *libp = lib;
    sym(lib, "nvmlErrorString", &api->error);
    sym(lib, "nvmlDeviceGetRemappedRows", &api->remapped);
    sym(lib, "nvmlSystemGetDriverVersion", &api->driver);
    if (sym(lib, "nvmlInit_v2", &api->init) < 0
        || sym(lib, "nvmlShutdown", &api->shutdown) < 0
        || sym(lib, "nvmlDeviceGetCount_v2", &api->count) < 0
        || sym(lib, "nvmlDeviceGetHandleByIndex_v2", &api->handle) < 0
        || sym(lib, "nvmlDeviceGetUUID", &api->uuid) < 0
        || sym(lib, "nvmlDeviceGetName", &api->name) < 0
        || sym(lib, "nvmlDeviceGetMemoryInfo", &api->memory) < 0
        || sym(lib, "nvmlDeviceGetTemperature", &api->temp) < 0) {
        pl_vet_cannot(v, "no GPU here: %s is not a usable NVML (%s)", path,
                      dlerror());
        return -1;
    }
    return 0;
}

/* N.B. an index in CUDA_VISIBLE_DEVICES is the CUDA driver's, which
 * orders by speed, then by PCI bus (CUDA_DEVICE_ORDER=FASTEST_FIRST);
 * NVML orders by PCI bus.  They agree on a node of one GPU model, and the
 * CUDA part matches its GPUs to NVML's by UUID. */
unsigned int pl_vet_visible(const char *cvd, const char *const *uuids,
                            unsigned int nall, unsigned int *idx)
{
    unsigned int n = 0;
    char *copy, *save = NULL;

    if (!cvd) {
        for (unsigned int i = 0; i < nall; i++)
            idx[n++] = i;
        return n;
    }
    if (!(copy = strdup(cvd)))
        return 0;
    for (char *t = strtok_r(copy, ",", &save); t && n < nall;
         t = strtok_r(NULL, ",", &save)) {
        long found = -1;
        char *end;

        while (*t == ' ')
            t++;
        if (*t >= '0' && *t <= '9') {
            long i = strtol(t, &end, 10);
            while (*end == ' ')
                end++;
            if (i < (long)nall && *end == '\0')
                found = i;
        } else if (!strncmp(t, "GPU-", 4)) {
            size_t len = strcspn(t, " ");
            for (unsigned int i = 0; i < nall; i++)
                if (!strncmp(uuids[i], t, len))
                    found = found == -1 ? (long)i : -2; /* ambiguous */
        }
        for (unsigned int k = 0; k < n && found >= 0; k++)
            if (idx[k] == (unsigned int)found)
                found = -1;
        if (found < 0)
            break;
        idx[n++] = (unsigned int)found;
    }
    free(copy);
    return n;
}

/* NVML's figures of GPU g, into g->o, and the thresholds on them. */
static void nvml_check(struct pl_vet *v, const struct nvml *api,
                       struct gpu *g, int i, const struct opts *o)
{
    struct nvml_device *d;
    struct nvml_memory m;
    unsigned int c, corr, unc, pending, failed;
    char name[96] = "";
    int rc;

    if ((rc = api->handle(g->nvml, &d)) != 0) {
        pl_vet_fail(v, "gpu.nvml", NAN, NAN, json_pack("{si}", "gpu", i),
                    "GPU %d: NVML has no handle for it: %s", i,
                    nvml_err(api, rc));
        return;
    }
    api->name(d, name, sizeof(name));
    json_object_set_new(g->o, "name", json_string(name));
    if ((rc = api->memory(d, &m)) == 0) {
        double total = m.total / 1048576.0, free_mb = m.free / 1048576.0;
        double pct = total > 0 ? 100 * free_mb / total : 0;

        json_object_set_new(g->o, "memory_total_mb", json_integer(total));
        json_object_set_new(g->o, "memory_free_mb", json_integer(free_mb));
        if (free_mb < o->min_free_mb)
            pl_vet_fail(v, "gpu.memory_free", free_mb, o->min_free_mb,
                        json_pack("{si}", "gpu", i),
                        "GPU %d: %.0f MB free, under %.0f MB", i, free_mb,
                        o->min_free_mb);
        else if (pct < o->min_free_pct)
            pl_vet_fail(v, "gpu.memory_free_pct", pct, o->min_free_pct,
                        json_pack("{si}", "gpu", i),
                        "GPU %d: %.1f%% of its memory free (%.0f of %.0f "
                        "MB), under %g%%: another process holds it?",
                        i, pct, free_mb, total, o->min_free_pct);
    } else {
        pl_vet_fail(v, "gpu.nvml", NAN, NAN, json_pack("{si}", "gpu", i),
                    "GPU %d: NVML cannot read its memory: %s", i,
                    nvml_err(api, rc));
    }
    if (api->temp(d, NVML_TEMPERATURE_GPU, &c) == 0) {
        json_object_set_new(g->o, "temperature_c", json_integer(c));
        if (c > o->max_temp)
            pl_vet_fail(v, "gpu.temperature", c, o->max_temp,
                        json_pack("{si}", "gpu", i),
                        "GPU %d at %u C, above %g C", i, c, o->max_temp);
    } else {
        json_object_set_new(g->o, "temperature_c", json_null());
    }
    /* a row remapping that failed or waits for a reset: the memory is
     * not to be trusted until the GPU is reset (NVIDIA's A100/H100
     * memory error management) */
    if (api->remapped
        && api->remapped(d, &corr, &unc, &pending, &failed) == 0) {
        json_object_set_new(g->o, "remapped_rows",
                            json_pack("{sisisbsb}", "correctable", corr,
                                      "uncorrectable", unc, "pending",
                                      pending != 0, "failed", failed != 0));
        if (pending || failed)
            pl_vet_fail(v, "gpu.remapped_rows", unc, NAN,
                        json_pack("{si}", "gpu", i),
                        "GPU %d: a memory row remapping %s (%u uncorrectable "
                        "rows): reset the GPU", i,
                        failed ? "failed" : "is pending", unc);
    }
}

/* Load the CUDA driver and cuInit(): 0, or -1 after pl_vet_cannot(). */
static int cuda_load(struct pl_vet *v, struct cuda *cu)
{
    const char *path = getenv("PILOT_CUDA_LIBRARY");
    void *lib;
    int rc;

    if (path && !*path) {
        /* node vetting passes a node with no NVML at all (docs) */
        json_object_set_new(v->out, "no_nvml", json_true());
        pl_vet_cannot(v, "the CUDA driver is not used "
                         "(PILOT_CUDA_LIBRARY is empty)");
        return -1;
    }
    if (!path)
        path = "libcuda.so.1";
    /* never closed: the driver cannot be unloaded after cuInit() */
    if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
        pl_vet_cannot(v, "no CUDA driver (%s)", dlerror());
        return -1;
    }
    sym(lib, "cuGetErrorName", &cu->error);
    if (sym(lib, "cuInit", &cu->init) < 0
        || sym(lib, "cuDriverGetVersion", &cu->version) < 0
        || sym(lib, "cuDeviceGetCount", &cu->count) < 0
        || sym(lib, "cuDeviceGet", &cu->get) < 0
        || (sym(lib, "cuDeviceGetUuid_v2", &cu->uuid) < 0
            && sym(lib, "cuDeviceGetUuid", &cu->uuid) < 0)
        || sym(lib, "cuDevicePrimaryCtxRetain", &cu->retain) < 0
        || sym(lib, "cuDevicePrimaryCtxRelease_v2", &cu->release) < 0
        || sym(lib, "cuCtxSetCurrent", &cu->set_current) < 0
        || sym(lib, "cuModuleLoadDataEx", &cu->load) < 0
        || sym(lib, "cuModuleUnload", &cu->unload) < 0
        || sym(lib, "cuModuleGetFunction", &cu->function) < 0
        || sym(lib, "cuMemAlloc_v2", &cu->alloc) < 0
        || sym(lib, "cuMemFree_v2", &cu->free) < 0
        || sym(lib, "cuMemcpyHtoD_v2", &cu->htod) < 0
        || sym(lib, "cuMemcpyDtoH_v2", &cu->dtoh) < 0
        || sym(lib, "cuLaunchKernel", &cu->launch) < 0
        || sym(lib, "cuCtxSynchronize", &cu->sync) < 0) {
        pl_vet_cannot(v, "%s is not a usable CUDA driver (%s)", path,
                      dlerror());
        return -1;
    }
    if ((rc = cu->init(0)) != 0) {
        pl_vet_cannot(v, "CUDA driver: cuInit: %s", cu_err(cu, rc));
        return -1;
    }
    return 0;
}

void pl_vet_uuid_text(const unsigned char *bytes, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "GPU-");

    for (int i = 0; i < 16 && off + 3 < len; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            buf[off++] = '-';
        off += (size_t)snprintf(buf + off, len - off, "%02x", bytes[i]);
    }
}

/* The kernel on CUDA device 'dev' (ordinal 'ord', our GPU 'i'): load,
 * run, check every element, time; into 'k'.  0 when it ran right, else
 * -1 after pl_vet_fail(). */
static int kernel(struct pl_vet *v, const struct cuda *cu, int dev, int i,
                  const struct opts *o, json_t *k)
{
    const float a = 1.5f, b = -3.25f;
    const unsigned int n = o->n, block = 256, reps = 20;
    size_t bytes = (size_t)n * sizeof(float);
    float *x = malloc(bytes), *y = malloc(bytes);
    void *ctx = NULL, *mod = NULL, *fn = NULL;
    cu_ptr dx = 0, dy = 0;
    char log[2048] = "";
    int opt[2] = { CU_JIT_ERROR_LOG_BUFFER,
                   CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *val[2] = { log, (void *)(uintptr_t)sizeof(log) };
    void *params[] = { &dx, &dy, (void *)&a, (void *)&b, (void *)&n };
    unsigned int grid = (n + block - 1) / block, bad = 0, first = 0;
    const char *step = "malloc";
    double t0, t_h2d, t_run, t_d2h;
    int rc = 0, retained = 0;

    if (!x || !y)
        goto error;
    for (unsigned int j = 0; j < n; j++)
        x[j] = (float)(j % 4096) - 2048.0f + 0.125f * (float)(j % 7);
    step = "cuDevicePrimaryCtxRetain";
    if ((rc = cu->retain(&ctx, dev)) != 0)
        goto error;
    retained = 1;
    step = "cuCtxSetCurrent";
    if ((rc = cu->set_current(ctx)) != 0)
        goto error;
    step = "cuModuleLoadDataEx (PTX JIT)";
    t0 = now();
    if ((rc = cu->load(&mod, pl_vet_ptx, 2, opt, val)) != 0)
        goto error;
    json_object_set_new(k, "jit_ms", json_real((now() - t0) * 1e3));
    step = "cuModuleGetFunction";
    if ((rc = cu->function(&fn, mod, "pl_vet_axpb")) != 0)
        goto error;
    step = "cuMemAlloc";
    if ((rc = cu->alloc(&dx, bytes)) != 0 || (rc = cu->alloc(&dy, bytes)))
        goto error;
    step = "cuMemcpyHtoD";
    t0 = now();
    if ((rc = cu->htod(dx, x, bytes)) != 0)
        goto error;
    t_h2d = now() - t0;
    step = "cuLaunchKernel";
    if ((rc = cu->launch(fn, grid, 1, 1, block, 1, 1, 0, NULL, params,
                         NULL)) != 0
        || (rc = cu->sync()) != 0)
        goto error;
    /* timed: 'reps' launches back to back, the first one warmed up */
    t0 = now();
    for (unsigned int r = 0; r < reps && rc == 0; r++)
        rc = cu->launch(fn, grid, 1, 1, block, 1, 1, 0, NULL, params, NULL);
    if (rc != 0 || (rc = cu->sync()) != 0)
        goto error;
    t_run = (now() - t0) / reps;
    step = "cuMemcpyDtoH";
    memset(y, 0, bytes);
    t0 = now();
    if ((rc = cu->dtoh(y, dy, bytes)) != 0)
        goto error;
    t_d2h = now() - t0;
    for (unsigned int j = 0; j < n; j++)
        if (y[j] != fmaf(a, x[j], b) && bad++ == 0)
            first = j;
    json_object_set_new(k, "elements", json_integer(n));
    json_object_set_new(k, "wrong", json_integer(bad));
    json_object_set_new(k, "kernel_us", json_real(t_run * 1e6));
    /* 4 bytes read and 4 written an element */
    json_object_set_new(k, "kernel_gbs", json_real(8.0 * n / t_run / 1e9));
    json_object_set_new(k, "h2d_gbs", json_real(bytes / t_h2d / 1e9));
    json_object_set_new(k, "d2h_gbs", json_real(bytes / t_d2h / 1e9));
    if (bad)
        pl_vet_fail(v, "gpu.kernel", bad, 0, json_pack("{si}", "gpu", i),
                    "GPU %d: the kernel got %u of %u elements wrong (the "
                    "first: y[%u] = %g, not %g)", i, bad, n, first,
                    (double)y[first], (double)fmaf(a, x[first], b));
    else if (8.0 * n / t_run / 1e9 < o->min_kernel_gbs)
        pl_vet_fail(v, "gpu.kernel_gbs", 8.0 * n / t_run / 1e9,
                    o->min_kernel_gbs, json_pack("{si}", "gpu", i),
                    "GPU %d: the kernel moved %.1f GB/s, under %g GB/s", i,
                    8.0 * n / t_run / 1e9, o->min_kernel_gbs);
    cu->free(dx);
    cu->free(dy);
    cu->unload(mod);
    cu->release(dev);
    free(x);
    free(y);
    return bad || 8.0 * n / t_run / 1e9 < o->min_kernel_gbs ? -1 : 0;
error:
    if (dx)
        cu->free(dx);
    if (dy)
        cu->free(dy);
    if (mod)
        cu->unload(mod);
    if (retained)
        cu->release(dev);
    free(x);
    free(y);
    pl_vet_fail(v, "gpu.kernel", NAN, NAN, json_pack("{si}", "gpu", i),
                "GPU %d: %s: %s%s%s", i, step,
                rc ? cu_err(cu, rc) : "out of memory", log[0] ? ": " : "",
                log);
    return -1;
}

/* The CUDA part: the driver must see the same GPUs, then the kernel on
 * each.  'g' are ours, in CUDA_VISIBLE_DEVICES's order. */
static void cuda_check(struct pl_vet *v, struct gpu *g, unsigned int n,
                       const struct opts *o)
{
    struct cuda cu;
    int count = 0, version = 0, rc;

    memset(&cu, 0, sizeof(cu));
    if (cuda_load(v, &cu) < 0)
        return;
    cu.version(&version);
    json_object_set_new(v->out, "cuda_driver_version", json_integer(version));
    if ((rc = cu.count(&count)) != 0) {
        pl_vet_fail(v, "gpu.cuda", NAN, NAN, NULL, "cuDeviceGetCount: %s",
                    cu_err(&cu, rc));
        return;
    }
    if (count != (int)n)
        pl_vet_fail(v, "gpu.cuda_count", count, n, NULL,
                    "the CUDA driver sees %d GPUs, NVML %u", count, n);
    for (int c = 0; c < count; c++) {
        struct cu_uuid u;
        char uuid[96];
        int dev, i = -1;

        if ((rc = cu.get(&dev, c)) != 0 || (rc = cu.uuid(&u, dev)) != 0) {
            pl_vet_fail(v, "gpu.cuda", NAN, NAN, NULL, "CUDA device %d: %s",
                        c, cu_err(&cu, rc));
            continue;
        }
        pl_vet_uuid_text(u.bytes, uuid, sizeof(uuid));
        for (unsigned int j = 0; j < n && i < 0; j++)
            if (!strcmp(g[j].uuid, uuid))
                i = (int)j;
        /* by UUID, not by place: the driver may order GPUs of several
         * models otherwise than NVML (pl_vet_visible()) */
        if (i < 0) {
            pl_vet_fail(v, "gpu.cuda_uuid", NAN, NAN, NULL,
                        "CUDA device %d is %s, not among the GPUs NVML "
                        "finds visible", c, uuid);
            continue;
        }
        json_object_set_new(g[i].o, "cuda_ordinal", json_integer(c));
        json_t *k = json_object();
        json_object_set_new(g[i].o, "kernel", k);
        json_object_set_new(k, "ok", json_boolean(kernel(v, &cu, dev, i, o,
                                                         k) == 0));
    }
}

static int parse(int argc, char **argv, struct opts *o, int *print_ptx)
{
    static const struct option longs[] = {
        { "expect", required_argument, NULL, 'e' },
        { "min-free-mb", required_argument, NULL, 'f' },
        { "min-free-pct", required_argument, NULL, 'p' },
        { "max-temp", required_argument, NULL, 't' },
        { "min-kernel-gbs", required_argument, NULL, 'k' },
        { "size", required_argument, NULL, 's' },
        { "print-ptx", no_argument, NULL, 'P' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    double x;
    int c;

    *o = (struct opts){ .expect = -1, .min_free_pct = 90, .max_temp = 85,
                        .n = 1u << 20 };
    *print_ptx = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", longs, NULL)) != -1) {
        const char *name = optind > 1 ? argv[optind - 1] : "?";
        switch (c) {
        case 'e':
            if (pl_vet_number("--expect", optarg, 0, MAX_GPUS, 0, &x) < 0)
                return -1;
            o->expect = (long)x;
            break;
        case 'f':
            if (pl_vet_number("--min-free-mb", optarg, 0, 1e9, 0,
                              &o->min_free_mb) < 0)
                return -1;
            break;
        case 'p':
            if (pl_vet_number("--min-free-pct", optarg, 0, 100, 0,
                              &o->min_free_pct) < 0)
                return -1;
            break;
        case 't':
            if (pl_vet_number("--max-temp", optarg, 0, 200, 0,
                              &o->max_temp) < 0)
                return -1;
            break;
        case 'k':
            if (pl_vet_number("--min-kernel-gbs", optarg, 0, 1e6, 0,
                              &o->min_kernel_gbs) < 0)
                return -1;
            break;
        case 's':
            if (pl_vet_number("--size", optarg, 1, 1 << 28, 1, &x) < 0)
                return -1;
            o->n = (unsigned int)x;
            break;
        case 'P':
            *print_ptx = 1;
            break;
        case 'h':
            pl_vet_usage(stdout, "gpu");
            exit(PL_VET_PASS);
        default:
            fprintf(stderr, "pilot-vetcheck: gpu: bad option '%s'\n", name);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "pilot-vetcheck: gpu: unexpected '%s'\n",
                argv[optind]);
        return -1;
    }
    return 0;
}

int pl_vet_gpu(int argc, char **argv)
{
    struct gpu all[MAX_GPUS], g[MAX_GPUS];
    unsigned int idx[MAX_GPUS], nall = 0, n;
    const char *uuids[MAX_GPUS];
    struct nvml api;
    struct opts o;
    struct pl_vet v;
    json_t *gpus;
    char driver[96] = "";
    void *lib = NULL;
    int print_ptx, rc;

    if (parse(argc, argv, &o, &print_ptx) < 0) {
        pl_vet_usage(stderr, "gpu");
        return PL_VET_USAGE;
    }
    if (print_ptx) {
        fputs(pl_vet_ptx, stdout);
        return fflush(stdout) == 0 ? PL_VET_PASS : PL_VET_FAIL;
    }
    if (pl_vet_init(&v, "gpu") < 0)
        return PL_VET_CANNOT;
    memset(&api, 0, sizeof(api));
    json_object_set_new(v.out, "expect", o.expect < 0
                                             ? json_null()
                                             : json_integer(o.expect));
    json_object_set_new(v.out, "limits",
                        json_pack("{sfsfsfsf}", "min_free_mb", o.min_free_mb,
                                  "min_free_pct", o.min_free_pct,
                                  "max_temp_c", o.max_temp,
                                  "min_kernel_gbs", o.min_kernel_gbs));
    if (!(gpus = json_array())
        || json_object_set_new(v.out, "gpus", gpus) < 0)
        goto out;
    if (nvml_load(&v, &api, &lib) < 0)
        goto out;
    if ((rc = api.init()) != 0) {
        pl_vet_cannot(&v, "no GPU here: NVML: nvmlInit: %s",
                      nvml_err(&api, rc));
        goto out;
    }
    if (api.driver && api.driver(driver, sizeof(driver)) == 0)
        json_object_set_new(v.out, "driver", json_string(driver));
    if ((rc = api.count(&nall)) != 0) {
        pl_vet_fail(&v, "gpu.nvml", NAN, NAN, NULL,
                    "nvmlDeviceGetCount: %s", nvml_err(&api, rc));
        goto shutdown;
    }
    nall = nall > MAX_GPUS ? MAX_GPUS : nall;
    for (unsigned int i = 0; i < nall; i++) {
        struct nvml_device *d;

        all[i].uuid[0] = '\0';
        if (api.handle(i, &d) == 0)
            api.uuid(d, all[i].uuid, sizeof(all[i].uuid));
    }
    for (unsigned int i = 0; i < nall; i++)
        uuids[i] = all[i].uuid;
    n = pl_vet_visible(getenv("CUDA_VISIBLE_DEVICES"), uuids, nall, idx);
    if (getenv("CUDA_VISIBLE_DEVICES"))
        json_object_set_new(v.out, "cuda_visible_devices",
                            json_string(getenv("CUDA_VISIBLE_DEVICES")));
    json_object_set_new(v.out, "nvml_count", json_integer(nall));
    json_object_set_new(v.out, "count", json_integer(n));
    if (o.expect >= 0 && n != (unsigned int)o.expect)
        pl_vet_fail(&v, "gpu.count", n, (double)o.expect, NULL,
                    "%u GPUs visible, %ld expected (NVML sees %u%s%s)", n,
                    o.expect, nall,
                    getenv("CUDA_VISIBLE_DEVICES")
                        ? ", CUDA_VISIBLE_DEVICES=" : "",
                    getenv("CUDA_VISIBLE_DEVICES")
                        ? getenv("CUDA_VISIBLE_DEVICES") : "");
    if (n == 0) {
        if (o.expect < 0)
            pl_vet_cannot(&v, "no GPU here: NVML sees %u, none visible",
                          nall);
        goto shutdown;
    }
    for (unsigned int i = 0; i < n; i++) {
        g[i] = all[idx[i]];
        g[i].nvml = idx[i];
        g[i].o = json_pack("{sisiss}", "index", i, "nvml_index", idx[i],
                           "uuid", g[i].uuid);
        json_array_append_new(gpus, g[i].o);
        nvml_check(&v, &api, &g[i], (int)i, &o);
    }
    cuda_check(&v, g, n, &o);
shutdown:
    api.shutdown();
out:
    /* NVML may be unloaded, unlike the CUDA driver */
    if (lib)
        dlclose(lib);
    return pl_vet_end(&v);
}
