/* agent/nvmlsample.c - the GPU sampler's child: NVML (dlopen at run
 * time) read every few seconds, one line of text a sample on stdout
 *
 * It runs as 'pilot-agent --gpu-sampler MS' (agent/gpusample.h), so that
 * NVML is never loaded into the agent and no NVML call, however long it
 * blocks, stalls the agent's loop.  What it writes, one line each:
 *
 *   gpu IDX UUID         once per device NVML lists, at the start
 *   ready N              then: N devices, samples follow
 *   sample IDX:UTIL:MEM:POWER ...   every MS ms: per device, % busy,
 *                        MB used, W drawn ('-' where NVML has no answer:
 *                        a MIG device has no utilisation, some boards
 *                        no power reading)
 *   error TEXT           NVML could not be used: it exits 1 after it
 *
 * It exits when its stdout is closed (the agent went: EPIPE), when the
 * agent dies (PR_SET_PDEATHSIG), or on SIGTERM.  As in agent/gpuprobe.c,
 * the few NVML types and prototypes used are declared here (nvml.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "agent/gpusample.h"

#define MAX_GPUS 64 /* as agent/gpuprobe.c */
#define NVML_SUCCESS 0

struct nvml_device;
struct nvml_memory {        /* nvmlMemory_t */
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};
struct nvml_utilization {   /* nvmlUtilization_t */
    unsigned int gpu;       /* % of the last period a kernel ran */
    unsigned int memory;
};

typedef int (*nvml_init_f)(void);
typedef int (*nvml_count_f)(unsigned int *count);
typedef int (*nvml_handle_f)(unsigned int index, struct nvml_device **dev);
typedef int (*nvml_uuid_f)(struct nvml_device *dev, char *buf,
                           unsigned int len);
typedef int (*nvml_util_f)(struct nvml_device *dev,
                           struct nvml_utilization *u);
typedef int (*nvml_memory_f)(struct nvml_device *dev, struct nvml_memory *m);
typedef int (*nvml_power_f)(struct nvml_device *dev, unsigned int *mw);
typedef const char *(*nvml_error_f)(int rc);

/* An error line, then exit 1. */
__attribute__((format(printf, 1, 2), noreturn))
static void fail(const char *fmt, ...)
{
    va_list ap;

    fputs("error ", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputs("\n", stdout);
    fflush(stdout);
    exit(1);
}

/* Write what is buffered; the agent gone (EPIPE): exit quietly. */
static void flush(void)
{
    if (fflush(stdout) != 0)
        exit(0);
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int pl_gpusample_main(int argc, char **argv)
{
    const char *path = getenv("PILOT_NVML_LIBRARY");
    struct nvml_device *dev[MAX_GPUS];
    unsigned int n = 0;
    long ms;
    void *lib;
    int rc;

    /* the agent's death ends us; so does a closed pipe (SIGPIPE is
     * ignored by the agent, and so by us: write fails with EPIPE) */
    (void)prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1)
        return 0;
    if (argc < 2 || (ms = strtol(argv[1], NULL, 10)) < 10 || ms > 3600000)
        fail("usage: pilot-agent --gpu-sampler MS (10 to 3600000)");
    if (!path)
        path = "libnvidia-ml.so.1";
    if (!*path)
        fail("NVML not used (PILOT_NVML_LIBRARY is empty)");
    if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
        const char *e = dlerror(); /* names the file */
        fail("%s", e ? e : "libnvidia-ml.so.1: cannot be loaded");
    }
    /* N.B. POSIX lets dlsym()'s void * be taken as a function pointer */
    nvml_init_f init = (nvml_init_f)dlsym(lib, "nvmlInit_v2");
    nvml_count_f count = (nvml_count_f)dlsym(lib, "nvmlDeviceGetCount_v2");
    nvml_handle_f handle = (nvml_handle_f)dlsym(
        lib, "nvmlDeviceGetHandleByIndex_v2");
    nvml_uuid_f uuid = (nvml_uuid_f)dlsym(lib, "nvmlDeviceGetUUID");
    nvml_util_f util = (nvml_util_f)dlsym(lib,
                                          "nvmlDeviceGetUtilizationRates");
    nvml_memory_f memory = (nvml_memory_f)dlsym(lib,
                                                "nvmlDeviceGetMemoryInfo");
    nvml_power_f power = (nvml_power_f)dlsym(lib, "nvmlDeviceGetPowerUsage");
    nvml_error_f error = (nvml_error_f)dlsym(lib, "nvmlErrorString");
    if (!init || !count || !handle || !uuid)
        fail("%s: not NVML (no nvmlInit_v2, nvmlDeviceGetCount_v2, "
             "nvmlDeviceGetHandleByIndex_v2 or nvmlDeviceGetUUID)", path);
    if ((rc = init()) != NVML_SUCCESS)
        fail("%s: nvmlInit_v2: %s (%d)", path,
             error && error(rc) ? error(rc) : "error", rc);
    if ((rc = count(&n)) != NVML_SUCCESS)
        fail("nvmlDeviceGetCount_v2: %s (%d)",
             error && error(rc) ? error(rc) : "error", rc);
    if (n > MAX_GPUS)
        n = MAX_GPUS;
    /* a device our cgroup denies has no handle: it is left out, as the
     * agent does not hold it either */
    unsigned int k = 0;
    for (unsigned int i = 0; i < n; i++) {
        char id[96];
        if (handle(i, &dev[k]) != NVML_SUCCESS
            || uuid(dev[k], id, sizeof(id)) != NVML_SUCCESS)
            continue;
        id[sizeof(id) - 1] = '\0';
        printf("gpu %u %s\n", k, id);
        k++;
    }
    if (k == 0)
        fail("NVML lists no GPU this process may use");
    printf("ready %u\n", k);
    flush();
    for (;;) {
        sleep_ms(ms);
        fputs("sample", stdout);
        for (unsigned int i = 0; i < k; i++) {
            struct nvml_utilization u;
            struct nvml_memory m;
            unsigned int mw;
            printf(" %u:", i);
            if (util && util(dev[i], &u) == NVML_SUCCESS)
                printf("%u:", u.gpu);
            else
                fputs("-:", stdout);
            if (memory && memory(dev[i], &m) == NVML_SUCCESS)
                printf("%llu:", m.used >> 20);
            else
                fputs("-:", stdout);
            if (power && power(dev[i], &mw) == NVML_SUCCESS)
                printf("%.3f", mw / 1000.0);
            else
                fputs("-", stdout);
        }
        fputs("\n", stdout);
        flush();
        if (getppid() == 1)
            return 0;
    }
}
