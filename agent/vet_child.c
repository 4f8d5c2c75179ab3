/* agent/vet_child.c - the node's checks, in a process of their own
 *
 * `pilot-agent --vet-child --node N [--dir DIR] [--cores LIST]
 * [--gpus IDS]` reads a VET message on stdin, runs its checks and writes
 * a VET_RESULT on stdout (agent/vet.c started it, re-executing its own
 * program: no threads, no loop, nothing of the agent's state, so that a
 * check may block and the agent's loop never does).  What each check
 * measures: docs/observability.md, "Node vetting".
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "agent/resources.h"
#include "agent/vet.h"
#include "agent/vet_private.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/strv.h"
#include "proto/vetmsg.h"

#define MIB (1024.0 * 1024.0)

void pl_vet_add(struct pl_vet_out *o, const char *name, bool ok, double figure,
                const char *unit, double limit, const char *fmt, ...)
{
    struct pl_vet_check *c;
    char detail[PL_VET_TEXT_MAX + 1];
    va_list ap;

    if (o->r.ncheck >= PL_VET_MAX_CHECKS)
        return;
    if (o->r.ncheck == o->cap) {
        uint32_t cap = o->cap ? 2 * o->cap : 8;
        void *p = realloc(o->r.check, cap * sizeof(*o->r.check));
        if (!p)
            return;
        o->r.check = p;
        o->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    pl_utf8_repair(detail);
    c = &o->r.check[o->r.ncheck++];
    c->name = strdup(name);
    c->ok = ok;
    c->figure = figure;
    c->unit = unit ? strdup(unit) : NULL;
    c->limit = limit;
    c->detail = strdup(detail);
    if (!ok)
        o->r.ok = false;
}

/* ------------------------------------------------------------ gpus */

/* Whether the device file of GPU 'id' is there for us: open() succeeds
 * or fails for the driver (ENXIO: no driver loaded, as on the dev
 * cluster), not for the file (ENOENT) or the device cgroup (EPERM). */
static int dev_state(const char *pattern, const char *id, char *path,
                     size_t len)
{
    const char *p = strstr(pattern, "%s");
    int fd;

    snprintf(path, len, "%.*s%s%s", (int)(p - pattern), pattern, id, p + 2);
    if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)) >= 0) {
        close(fd);
        return 0;
    }
    if (errno == ENOENT || errno == EPERM || errno == EACCES
        || errno == ENOTDIR)
        return errno;
    return 0;
}

/* Returns how many GPUs Slurm granted. */
static size_t check_gpus(struct pl_vet_out *o, const struct pl_vetconf *c,
                         const char *usable)
{
    const char *grant = getenv("SLURM_STEP_GPUS");
    char **granted, **have;
    char path[PL_VET_TEXT_MAX + 64], missing[2 * PL_VET_TEXT_MAX] = "";
    size_t ng, nu = 0, nfiles = 0;

    if (!grant || !*grant)
        grant = getenv("SLURM_JOB_GPUS");
    if (!grant || !*grant)
        grant = getenv("CUDA_VISIBLE_DEVICES");
    granted = pl_idlist_split(grant);
    have = pl_idlist_split(usable);
    ng = pl_strv_len(granted);
    if (c->gpu_devices)
        for (size_t i = 0; i < ng; i++)
            nfiles += dev_state(c->gpu_devices, granted[i], path,
                                sizeof(path)) != ENOENT;
    for (size_t i = 0; have && have[i]; i++) {
        int e = c->gpu_devices && nfiles
                    ? dev_state(c->gpu_devices, have[i], path, sizeof(path))
                    : 0;
        if (!e) {
            nu++;
            continue;
        }
        size_t l = strlen(missing);
        snprintf(missing + l, sizeof(missing) - l, "%s%s: %s",
                 l ? "; " : "", path, strerror(e));
    }
    /* granted GPUs the agent dropped (its GPU library did not find them) */
    for (size_t i = 0; granted && granted[i]; i++) {
        bool in = false;
        for (size_t j = 0; have && have[j] && !in; j++)
            in = !strcmp(granted[i], have[j]);
        if (!in) {
            size_t l = strlen(missing);
            snprintf(missing + l, sizeof(missing) - l, "%sGPU %s: not found "
                     "by the GPU library", l ? "; " : "", granted[i]);
        }
    }
    if (ng == 0)
        pl_vet_add(o, "gpus", nu == 0, (double)nu, "gpus", 0, "Slurm granted no "
            "GPU%s", nu ? ", but the agent has some" : "");
    else if (nu == ng)
        pl_vet_add(o, "gpus", true, (double)nu, "gpus", (double)ng, "%zu of %zu "
            "granted (%s)%s", nu, ng, grant,
            c->gpu_devices && !nfiles ? "; no device file like "
                                        "gpus.devices says: not opened"
                                      : "");
    else
        pl_vet_add(o, "gpus", false, (double)nu, "gpus", (double)ng, "%zu of the "
            "%zu Slurm granted (%s) usable: %s", nu, ng, grant, missing);
    pl_strv_free(granted);
    pl_strv_free(have);
    return ng;
}

/* ------------------------------------------------------------ disk, memory */

static void check_disk(struct pl_vet_out *o, const struct pl_vetconf *c,
                       const char *path)
{
    struct statvfs sv;
    char at[PL_VET_TEXT_MAX + 16];
    const double limit = (double)c->disk_min_mb;

    snprintf(at, sizeof(at), "%s", path);
    /* a directory not made yet (tasks/ before the first task): its
     * parent's file system */
    while (statvfs(at, &sv) < 0) {
        char *slash = strrchr(at, '/');
        if (errno != ENOENT || !slash || slash == at) {
            pl_vet_add(o, "disk", false, NAN, "MiB", limit, "%s: %s", path,
                strerror(errno));
            return;
        }
        *slash = '\0';
    }
    double free_mb = (double)sv.f_bavail * (double)sv.f_frsize / MIB;
    pl_vet_add(o, "disk", free_mb >= limit, floor(free_mb), "MiB", limit,
        "%s: %.0f MiB free of %.0f MiB", path, free_mb,
        (double)sv.f_blocks * (double)sv.f_frsize / MIB);
}

static void check_memory(struct pl_vet_out *o, const struct pl_vetconf *c)
{
    FILE *fp = fopen("/proc/meminfo", "re");
    char line[256];
    double kb = -1;

    while (fp && fgets(line, sizeof(line), fp))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
            break;
    if (fp)
        fclose(fp);
    if (kb < 0) {
        pl_vet_add(o, "memory", false, NAN, "MiB", (double)c->mem_min_mb,
            "/proc/meminfo: no MemAvailable");
        return;
    }
    pl_vet_add(o, "memory", kb / 1024 >= (double)c->mem_min_mb, floor(kb / 1024),
        "MiB", (double)c->mem_min_mb, "%.0f MiB available", kb / 1024);
}

/* ------------------------------------------------------------ cpu */

double pl_vet_mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The fixed work: xorshift and a multiply, a chain the compiler cannot
 * fold or vectorise (each turn needs the last). */
static uint64_t cpu_loop(uint64_t n, uint64_t x)
{
    uint64_t acc = 0;

    x |= 1;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc += x * UINT64_C(0x9E3779B97F4A7C15);
    }
    return acc;
}

static volatile uint64_t sink;

static double thread_cpu(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The cgroups whose CPU quota may hold us back: ours and its ancestors',
 * as cpu.stat files (cgroup v1's cpu controller, v2's unified tree).  At
 * most 'max' paths into 'files'; their count. */
#define MAX_STAT 16
#define STAT_LEN (PL_PATH_MAX + 256)
static int quota_files(char files[][STAT_LEN], int max)
{
    FILE *fp = fopen("/proc/self/cgroup", "re");
    char line[PL_PATH_MAX];
    int n = 0;

    while (fp && fgets(line, sizeof(line), fp) && n < max) {
        char *ctl = strchr(line, ':'), *path;
        if (!ctl || !(path = strchr(ctl + 1, ':')))
            continue;
        *path++ = '\0';
        path[strcspn(path, "\n")] = '\0';
        ctl++;
        /* v1: a hierarchy with the cpu controller; v2: "0::" */
        bool v1 = false;
        char list[128];
        snprintf(list, sizeof(list), ",%s,", ctl);
        if (strstr(list, ",cpu,"))
            v1 = true;
        else if (*ctl)
            continue;
        const char *roots[3];
        int nr = 0;
        if (v1) {
            static char r1[160];
            snprintf(r1, sizeof(r1), "/sys/fs/cgroup/%s", ctl);
            roots[nr++] = r1;
            roots[nr++] = "/sys/fs/cgroup/cpu";
        }
        else {
            roots[nr++] = "/sys/fs/cgroup";
            roots[nr++] = "/sys/fs/cgroup/unified";
        }
        for (int r = 0; r < nr && n < max; r++) {
            /* the cgroup, then each ancestor up to the root */
            char at[PL_PATH_MAX];
            snprintf(at, sizeof(at), "%s", path);
            for (;;) {
                snprintf(files[n], STAT_LEN, "%s%s/cpu.stat", roots[r],
                         strcmp(at, "/") ? at : "");
                if (access(files[n], R_OK) == 0 && ++n >= max)
                    break;
                char *slash = strrchr(at, '/');
                if (!slash || slash == at)
                    break;
                *slash = '\0';
            }
        }
    }
    if (fp)
        fclose(fp);
    return n;
}

/* Seconds the cgroup of 'file' has been held back by its quota so far:
 * v1's throttled_time (ns), v2's throttled_usec; 0 if it says none. */
static double throttled(const char *file)
{
    FILE *fp = fopen(file, "re");
    char key[64];
    unsigned long long v;
    double t = 0;

    while (fp && fscanf(fp, "%63s %llu", key, &v) == 2) {
        if (!strcmp(key, "throttled_time"))
            t = (double)v * 1e-9;
        else if (!strcmp(key, "throttled_usec"))
            t = (double)v * 1e-6;
    }
    if (fp)
        fclose(fp);
    return t;
}

/* The most any of the 'n' cgroups was held back; 'at' gets each's now. */
static double throttled_since(char files[][STAT_LEN], int n, double *at)
{
    double most = 0;

    for (int i = 0; i < n; i++) {
        double t = throttled(files[i]);
        if (t - at[i] > most)
            most = t - at[i];
        at[i] = t;
    }
    return most;
}

/* On each core alone (bound to it), 'slices' runs of the loop; a core's
 * figure is its best run in millions of turns a second of the time it
 * ran (its thread's CPU time: a core slowed by its frequency, thermal or
 * power capping, shows) plus the time a CPU quota of its cgroups held it
 * back (cpu.stat's throttled time: a node whose CPU share is capped
 * shows), but not the time other processes had the CPU: the node's own
 * running tasks (`pilot vet` on a busy node) and, on the dev cluster,
 * the other nodes sharing its CPUs do not make it slow.  The node's
 * figure is its slowest core's.  Cores one after the other.  pilotd
 * compares the nodes (daemon/vet.c). */
static void check_cpu(struct pl_vet_out *o, const struct pl_vetconf *c,
                      const char *cores)
{
    uint64_t *cpu = NULL;
    uint32_t ncpu = 0;
    struct pl_error err;
    double worst = INFINITY, best = 0, held = 0;
    uint64_t worst_id = 0, best_id = 0;
    uint32_t done = 0;
    cpu_set_t all;
    static char files[MAX_STAT][STAT_LEN];
    double at[MAX_STAT];
    int nfiles = quota_files(files, MAX_STAT);

    (void)sched_getaffinity(0, sizeof(all), &all);
    if (pl_cpulist_parse(cores ? cores : "", &cpu, &ncpu, &err) < 0
        || ncpu == 0) {
        /* no --cores: the CPUs we may run on */
        free(cpu);
        ncpu = 0;
        if (!(cpu = calloc(CPU_SETSIZE, sizeof(*cpu))))
            return;
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &all))
                cpu[ncpu++] = (uint64_t)i;
    }
    for (uint32_t k = 0; k < ncpu; k++) {
        cpu_set_t one;
        double rate = 0;
        CPU_ZERO(&one);
        CPU_SET(cpu[k], &one);
        if (sched_setaffinity(0, sizeof(one), &one) < 0)
            continue;
        (void)throttled_since(files, nfiles, at);
        for (uint32_t s = 0; s < c->cpu_slices; s++) {
            double t0 = thread_cpu();
            sink += cpu_loop(c->cpu_iterations, (uint64_t)(t0 * 1e9) ^ s);
            double run = thread_cpu() - t0;
            double hold = throttled_since(files, nfiles, at);
            double dt = run + hold;
            held += hold;
            if (dt > 0 && (double)c->cpu_iterations / dt / 1e6 > rate)
                rate = (double)c->cpu_iterations / dt / 1e6;
        }
        done++;
        if (rate < worst) {
            worst = rate;
            worst_id = cpu[k];
        }
        if (rate > best) {
            best = rate;
            best_id = cpu[k];
        }
    }
    (void)sched_setaffinity(0, sizeof(all), &all);
    free(cpu);
    if (!done) {
        pl_vet_add(o, "cpu", false, NAN, "Mop/s", NAN, "could not run on any of "
            "the node's cores");
        return;
    }
    char quota[80] = "";
    if (held > 0)
        snprintf(quota, sizeof(quota), "; held back by a CPU quota for "
                 "%.2f s", held);
    pl_vet_add(o, "cpu", true, round(worst * 10) / 10, "Mop/s", NAN, "slowest core "
        "%llu: %.1f, fastest core %llu: %.1f Mop/s (%u cores)%s",
        (unsigned long long)worst_id, worst, (unsigned long long)best_id, best,
        done, quota);
}

int pl_vet_read_all(int fd, char **buf, size_t *len, double deadline)
{
    size_t cap = 0;

    *buf = NULL;
    *len = 0;
    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        double left = deadline - pl_vet_mono();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (poll(&p, 1, (int)(left * 1000) + 1) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (!p.revents)
            continue;
        if (*len + 4096 > cap) {
            if (cap >= PL_VET_READ_MAX) {
                char junk[4096];
                if (read(fd, junk, sizeof(junk)) <= 0)
                    return 0;
                continue; /* over the limit: drained, not kept */
            }
            char *nb = realloc(*buf, cap = cap ? 2 * cap : 8192);
            if (!nb)
                return -1;
            *buf = nb;
        }
        ssize_t n = read(fd, *buf + *len, cap - *len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -1 : 0;
        *len += (size_t)n;
        (*buf)[*len] = '\0';
    }
}

/* ------------------------------------------------------------ main */

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int pl_vet_child_main(int argc, char **argv)
{
    const char *node = NULL, *dir = NULL, *cores = NULL, *gpus = "";
    char *in = NULL;
    size_t inlen = 0;
    struct pl_msg m;
    struct pl_error err;
    struct pl_vetconf c;
    struct pl_vet_out o = { 0 };
    uint64_t token;
    struct pl_wbuf w;
    double t0 = pl_vet_mono();

    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--node"))
            node = argv[i + 1];
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--cores"))
            cores = argv[i + 1];
        else if (!strcmp(argv[i], "--gpus"))
            gpus = argv[i + 1];
    }
    if (!node) {
        fprintf(stderr, "pilot-agent --vet-child: --node is required\n");
        return 2;
    }
    /* no checks left running by an agent that died */
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (pl_vet_read_all(0, &in, &inlen, pl_vet_mono() + 60) < 0 || !in
        || pl_msg_decode(in, inlen, &m, &err) < 0) {
        fprintf(stderr, "pilot-agent --vet-child: no VET message on stdin\n");
        free(in);
        return 2;
    }
    if (m.type != PL_MSG_VET || pl_vet_decode(m.body, &token, &c, &err) < 0) {
        fprintf(stderr, "pilot-agent --vet-child: bad VET: %s\n",
                m.type != PL_MSG_VET ? "not a VET" : err.text);
        pl_msg_release(&m);
        free(in);
        return 2;
    }
    pl_msg_release(&m);
    free(in);
    o.r.ok = true;
    if (c.gpus) {
        size_t ng = check_gpus(&o, &c, gpus);
        if (ng && c.gpu_vetcheck)
            pl_vet_check_gpu_health(&o, &c, ng, c.timeout - (pl_vet_mono() - t0) - 1);
    }
    if (c.disk && c.disk_task_dir && dir) {
        char path[PL_PATH_MAX + 8];
        snprintf(path, sizeof(path), "%s/tasks", dir);
        check_disk(&o, &c, path);
    }
    for (char **p = c.disk ? c.disk_paths : NULL; p && *p; p++)
        check_disk(&o, &c, *p);
    if (c.memory)
        check_memory(&o, &c);
    if (c.cpu)
        check_cpu(&o, &c, cores);
    for (uint32_t i = 0; i < c.next; i++)
        pl_vet_check_external(&o, &c.ext[i]);
    o.r.node = (char *)node;
    o.r.token = token;
    o.r.time = pl_now();
    o.r.took = pl_vet_mono() - t0;
    pl_vet_result_encode(&w, 0, &o.r);
    int rc = write_all(1, w.sb.data, w.sb.size) < 0 ? 1 : 0;
    pl_wbuf_destroy(&w);
    o.r.node = NULL;
    pl_vet_result_clear(&o.r);
    pl_vetconf_clear(&c);
    return rc;
}
