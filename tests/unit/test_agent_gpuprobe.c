/* tests/unit/test_gpuprobe.c - GPU discovery: the real degrade paths of
 * the NVML / CUDA driver probe, and the cross-check with Slurm's grant */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/gpuprobe.h"
#include "agent/resources.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "tests/unit/tap.h"

/* The CUDA toolkit's stub of the driver: a real libcuda that answers
 * cuInit() with CUDA_ERROR_STUB_LIBRARY (34). */
static const char *cuda_stub(void)
{
    static const char *paths[] = { "/usr/local/cuda/lib64/stubs/libcuda.so",
                                   "/usr/local/cuda/lib/stubs/libcuda.so",
                                   NULL };

    for (int i = 0; paths[i]; i++)
        if (access(paths[i], R_OK) == 0)
            return paths[i];
    return NULL;
}

static struct pl_gpuprobe *probe(const char *nvml, const char *cuda)
{
    struct pl_gpuprobe_spec spec = { .nvml_library = nvml,
                                     .cuda_library = cuda };

    return pl_gpuprobe_new(&spec);
}

/* Whether p is a clean "no GPU library" result whose reason holds each
 * of the NULL-terminated strings. */
static int none_because(const struct pl_gpuprobe *p, ...)
{
    va_list ap;
    const char *s;
    size_t n = 99;
    int good;

    if (!p)
        return 0;
    good = pl_gpuprobe_lib(p) == PL_GPUPROBE_NONE
           && pl_gpuprobe_devs(p, &n) != NULL && n == 0;
    va_start(ap, p);
    while ((s = va_arg(ap, const char *)))
        if (!strstr(pl_gpuprobe_reason(p), s))
            good = 0;
    va_end(ap);
    if (!good)
        diag("lib %d, %zu GPUs, reason '%s'", (int)pl_gpuprobe_lib(p), n,
             pl_gpuprobe_reason(p));
    return good;
}

static void test_no_library(void)
{
    struct pl_gpuprobe *p;

    p = probe("/nonexistent/libnvidia-ml.so.1", "/nonexistent/libcuda.so.1");
    ok(none_because(p, "/nonexistent/libnvidia-ml.so.1",
                    "/nonexistent/libcuda.so.1", NULL),
       "no library at either path: no GPU library, both named (%s)",
       p ? pl_gpuprobe_reason(p) : "NULL");
    pl_gpuprobe_free(p);

    p = probe("", "");
    ok(none_because(p, "NVML skipped", "CUDA driver skipped", NULL),
       "both set empty: skipped, and said so");
    pl_gpuprobe_free(p);

    /* real libraries that are not the one asked for */
    p = probe("libc.so.6", "libm.so.6");
    ok(none_because(p, "libc.so.6: not NVML",
                    "libm.so.6: not the CUDA driver", NULL),
       "other libraries at the paths: refused by their symbols (%s)",
       p ? pl_gpuprobe_reason(p) : "NULL");
    pl_gpuprobe_free(p);

    is_str(pl_gpuprobe_lib_name(PL_GPUPROBE_NVML), "NVML", "lib name: NVML");
    is_str(pl_gpuprobe_lib_name(PL_GPUPROBE_NONE), "no GPU library",
           "lib name: none");
    pl_gpuprobe_free(NULL);
    errno = EXDEV;
    pl_gpuprobe_free(probe("", ""));
    is(errno, EXDEV, "free: preserves errno");
}

/* Whether a file whose name holds 'name' is mapped in this process. */
static int mapped(const char *name)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");

    while (f && fgets(line, sizeof(line), f))
        found |= strstr(line, name) != NULL;
    if (f)
        fclose(f);
    return found;
}

static void test_cuda_stub(void)
{
    const char *stub = cuda_stub();
    struct pl_gpuprobe *p;

    if (!stub) {
        for (int i = 0; i < 3; i++)
            ok(1, "# SKIP no CUDA toolkit stub libcuda.so here");
        return;
    }
    p = probe("", stub);
    ok(none_because(p, stub, "cuInit", "CUDA_ERROR_STUB_LIBRARY", "(34)",
                    NULL),
       "CUDA stub: no GPU library, CUDA_ERROR_STUB_LIBRARY (%s)",
       p ? pl_gpuprobe_reason(p) : "NULL");
    pl_gpuprobe_free(p);
    ok(!mapped("libcuda"), "CUDA stub: probed in a child, never mapped "
                           "here");

    /* the stub is a real library, but it is not NVML */
    p = probe(stub, "/nonexistent/libcuda.so.1");
    ok(none_because(p, "not NVML", NULL),
       "CUDA stub as NVML: refused by its symbols");
    pl_gpuprobe_free(p);
}

/* The defaults, whatever this machine has: a clean answer either way. */
static void test_defaults(void)
{
    struct pl_gpuprobe *p = pl_gpuprobe_new(NULL);
    const struct pl_gpuprobe_dev *d;
    size_t n = 0;
    int sane = 1;

    ok(p != NULL, "defaults: a result");
    if (!p)
        return;
    d = pl_gpuprobe_devs(p, &n);
    diag("this machine: %s, %zu GPUs: %s",
         pl_gpuprobe_lib_name(pl_gpuprobe_lib(p)), n, pl_gpuprobe_reason(p));
    for (size_t i = 0; i < n; i++) {
        diag("  %d (minor %d): %s, %llu bytes, %s", d[i].index, d[i].minor,
             d[i].name, (unsigned long long)d[i].memory, d[i].uuid);
        if (d[i].index < 0 || !memchr(d[i].name, '\0', sizeof(d[i].name))
            || !memchr(d[i].uuid, '\0', sizeof(d[i].uuid)))
            sane = 0;
    }
    ok(pl_gpuprobe_reason(p)[0] != '\0', "defaults: a reason");
    ok(pl_gpuprobe_lib(p) == PL_GPUPROBE_NONE ? n == 0 : n > 0 && sane,
       "defaults: no library and no GPU, or a library and its GPUs");
    pl_gpuprobe_free(p);
}

/* A node of four GPUs as NVML lists them, from the whole node's view. */
static const struct pl_gpuprobe_dev node4[] = {
    { 0, 0, "GPU-00000000-aaaa-0000-0000-000000000000", "NVIDIA H200",
      150754820096ULL },
    { 1, 1, "GPU-11111111-aaaa-0000-0000-000000000000", "NVIDIA H200",
      150754820096ULL },
    { 2, 2, "GPU-22222222-aaaa-0000-0000-000000000000", "NVIDIA H200",
      150754820096ULL },
    { 3, 3, "GPU-33333333-aaaa-0000-0000-000000000000", "NVIDIA H200",
      150754820096ULL },
};

/* Inside a step's device cgroup NVML lists only the step's GPUs, from
 * index 0, but their minor numbers stay the node's. */
static const struct pl_gpuprobe_dev cgroup23[] = {
    { 0, 2, "GPU-22222222-aaaa-0000-0000-000000000000", "NVIDIA H200",
      150754820096ULL },
    { 1, 3, "GPU-33333333-aaaa-0000-0000-000000000000", "NVIDIA H200",
      150754820096ULL },
};

/* What the CUDA driver lists with CUDA_VISIBLE_DEVICES=0 in a step whose
 * second GPU is gone. */
static const struct pl_gpuprobe_dev cuda1[] = {
    { 0, -1, "GPU-22222222-aaaa-0000-0000-000000000000", "NVIDIA H200",
      150754820096ULL },
};

/* Run the check on comma list 'ids'; return the matches as "2,-1,0" and
 * the message in *msg. */
static const char *check(enum pl_gpuprobe_lib lib,
                         const struct pl_gpuprobe_dev *devs, size_t ndevs,
                         const char *ids, unsigned flags, size_t *found,
                         struct pl_error *msg)
{
    static char buf[256];
    char **v = pl_idlist_split(ids);
    long match[16];
    size_t n = pl_strv_len(v), off = 0;

    buf[0] = '\0';
    if (!v || n > 16)
        return "error";
    *found = pl_gpuprobe_check(lib, devs, ndevs, v, flags, match, msg);
    for (size_t i = 0; i < n; i++)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%ld",
                                i ? "," : "", match[i]);
    pl_strv_free(v);
    return buf;
}

#define NVML PL_GPUPROBE_NVML
#define CUDA PL_GPUPROBE_CUDA
#define SLURM PL_GPUPROBE_SLURM_IDS
#define CVD PL_GPUPROBE_CUDA_VISIBLE
#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_check(void)
{
    struct pl_error msg;
    size_t found;

    is_str(check(NVML, node4, N(node4), "2,3", SLURM, &found, &msg), "2,3",
           "check: NVML, Slurm ids are minor numbers");
    ok(found == 2 && msg.text[0] == '\0', "check: all found, no message");

    is_str(check(NVML, cgroup23, N(cgroup23), "2,3", SLURM | CVD, &found,
                 &msg), "0,1",
           "check: NVML in a device cgroup: by minor number, not index");
    is(found, 2, "check: both found");

    is_str(check(NVML, node4, N(node4), "1,5,7", SLURM, &found, &msg),
           "1,-1,-1", "check: ids NVML does not have are -1");
    is(found, 1, "check: one of three found");
    ok(strstr(msg.text, "Slurm granted GPUs 5,7") && strstr(msg.text, "NVML")
           && strstr(msg.text, "not using them"),
       "check: the warning names them (%s)", msg.text);

    is_str(check(NVML, cgroup23, N(cgroup23), "0", SLURM, &found, &msg), "-1",
           "check: NVML index 0 is not Slurm's GPU 0");
    ok(found == 0 && strstr(msg.text, "GPU 0 ")
           && strstr(msg.text, "not using it"),
       "check: one missing GPU, singular (%s)", msg.text);

    is_str(check(NVML, node4, N(node4), "", SLURM, &found, &msg), "",
           "check: Slurm granted none");
    ok(found == 0 && strstr(msg.text, "sees 4 GPUs")
           && strstr(msg.text, "granted none"),
       "check: a notice, none used (%s)", msg.text);

    is_str(check(NVML, NULL, 0, "", SLURM, &found, &msg), "",
           "check: nothing granted, nothing seen");
    ok(found == 0 && msg.text[0] == '\0', "check: no message");

    is_str(check(NVML, cgroup23, N(cgroup23), "1,0", CVD, &found, &msg),
           "1,0", "check: ids from CUDA_VISIBLE_DEVICES alone: NVML index");

    is_str(check(NVML, node4, N(node4),
                 "GPU-33333333-aaaa-0000-0000-000000000000,GPU-ffff", CVD,
                 &found, &msg), "3,-1",
           "check: UUIDs matched by UUID");
    ok(found == 1
           && strstr(msg.text, "CUDA_VISIBLE_DEVICES names GPU GPU-ffff"),
       "check: unknown UUID (%s)", msg.text);

    is_str(check(NVML, node4, N(node4), "abc,2x,-1", SLURM, &found, &msg),
           "-1,-1,-1", "check: ids that are not numbers match nothing");

    is_str(check(CUDA, cuda1, N(cuda1), "2,3", SLURM | CVD, &found, &msg),
           "0,-1",
           "check: CUDA honours CUDA_VISIBLE_DEVICES: by position");
    ok(found == 1 && strstr(msg.text, "GPU 3 ")
           && strstr(msg.text, "CUDA driver"),
       "check: the CUDA driver's missing GPU named (%s)", msg.text);

    is_str(check(CUDA, node4, N(node4), "1,3", SLURM, &found, &msg), "1,3",
           "check: CUDA without CUDA_VISIBLE_DEVICES: id = ordinal");

    is_str(check(PL_GPUPROBE_NONE, NULL, 0, "2,3", SLURM, &found, &msg),
           "-1,-1", "check: no library: nothing to match");
    ok(found == 2 && msg.text[0] == '\0',
       "check: no library: all kept, no message");

    is_str(check(NVML, node4, N(node4),
                 "100,101,102,103,104,105,106,107,108,109,110,111,112,113",
                 SLURM, &found, &msg),
           "-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1",
           "check: many missing");
    ok(found == 0 && strstr(msg.text, "...") && strlen(msg.text) < 160,
       "check: a long list is cut (%s)", msg.text);

    long match[2];
    char id1[] = "1";
    char *ids[] = { id1, NULL };
    is(pl_gpuprobe_check(NVML, node4, N(node4), ids, SLURM, match, NULL), 1,
       "check: msg may be NULL");
}

/* The GPUs pl_resources_new() keeps, as "id/visible/uuid-prefix ...". */
static const char *kept(const char *step, const char *cvd,
                        enum pl_gpuprobe_lib lib,
                        const struct pl_gpuprobe_dev *devs, size_t ndevs)
{
    static char buf[256];
    struct pl_resources_spec spec = { .node = "n1", .cores = "0",
                                      .step_gpus = step, .cuda_visible = cvd,
                                      .gpu_probe = "test", .gpu_lib = lib,
                                      .gpu_devs = devs, .gpu_ndevs = ndevs };
    struct pl_resources *r = pl_resources_new(&spec, NULL);
    size_t off = 0;

    if (!r)
        return "error";
    buf[0] = '\0';
    for (size_t i = 0; i < pl_resources_ngpus(r); i++) {
        const struct pl_gpuprobe_dev *d = pl_resources_gpu_dev(r, i);
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s/%s/%.12s",
                                i ? " " : "", pl_resources_gpu_id(r, i),
                                pl_resources_gpu_visible(r, i),
                                d ? d->uuid : "-");
    }
    ok(pl_strv_len(pl_resources_gpu_ids(r)) == pl_resources_ngpus(r)
           && pl_resources_free_gpus(r) == pl_resources_ngpus(r)
           && pl_resources_gpu_dev(r, pl_resources_ngpus(r)) == NULL,
       "resources: id vector, free count and facts agree");
    pl_resources_free(r);
    return buf;
}

static void test_resources(void)
{
    is_str(kept("2,3", "0,1", NVML, cgroup23, N(cgroup23)),
           "2/0/GPU-22222222 3/1/GPU-33333333",
           "resources: NVML confirms both, facts attached");
    is_str(kept("1,2,3", "0,1,2", NVML, cgroup23, N(cgroup23)),
           "2/1/GPU-22222222 3/2/GPU-33333333",
           "resources: a GPU NVML does not see is dropped, pairs kept");
    is_str(kept("2,3", "0,1", CUDA, cuda1, N(cuda1)), "2/0/GPU-22222222",
           "resources: CUDA driver: the second visible GPU is missing");
    is_str(kept(NULL, NULL, NVML, node4, N(node4)), "",
           "resources: Slurm granted none: none used");
    is_str(kept("2,3", "0,1", PL_GPUPROBE_NONE, NULL, 0), "2/0/- 3/1/-",
           "resources: no library: Slurm's variables, no facts");
    is_str(kept("5", NULL, NVML, cgroup23, N(cgroup23)), "",
           "resources: the only GPU is missing: none left");

    /* not probed at all (pilot-agent --exec-rank): as before */
    struct pl_resources_spec spec = { .node = "n1", .cores = "0",
                                      .step_gpus = "7" };
    struct pl_resources *r = pl_resources_new(&spec, NULL);
    ok(r && pl_resources_ngpus(r) == 1 && !pl_resources_gpu_dev(r, 0),
       "resources: not probed: Slurm's ids, no facts");
    pl_resources_free(r);
}

int main(void)
{
    pl_log_level = LOG_ERR; /* the cross-check's warnings are expected */
    plan(50);
    test_defaults();
    test_no_library();
    test_cuda_stub();
    test_check();
    test_resources();
    return done_testing();
}
