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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/resources.h"
#include "agent/spawn.h"
#include "agent/vet.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/strv.h"
#include "proto/vetmsg.h"

#define MIB (1024.0 * 1024.0)
#define EXT_OUT_MAX (256 * 1024) /* bytes of an external program's JSON */

struct out {
    struct pl_vet_result r;
    uint32_t cap;
};

/* A check into the result; 'detail' is a printf format. */
static void add(struct out *o, const char *name, bool ok, double figure,
                const char *unit, double limit, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static void add(struct out *o, const char *name, bool ok, double figure,
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
static size_t check_gpus(struct out *o, const struct pl_vetconf *c,
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
        add(o, "gpus", nu == 0, (double)nu, "gpus", 0, "Slurm granted no "
            "GPU%s", nu ? ", but the agent has some" : "");
    else if (nu == ng)
        add(o, "gpus", true, (double)nu, "gpus", (double)ng, "%zu of %zu "
            "granted (%s)%s", nu, ng, grant,
            c->gpu_devices && !nfiles ? "; no device file like "
                                        "gpus.devices says: not opened"
                                      : "");
    else
        add(o, "gpus", false, (double)nu, "gpus", (double)ng, "%zu of the "
            "%zu Slurm granted (%s) usable: %s", nu, ng, grant, missing);
    pl_strv_free(granted);
    pl_strv_free(have);
    return ng;
}

/* ------------------------------------------------------------ disk, memory */

static void check_disk(struct out *o, const struct pl_vetconf *c,
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
            add(o, "disk", false, NAN, "MiB", limit, "%s: %s", path,
                strerror(errno));
            return;
        }
        *slash = '\0';
    }
    double free_mb = (double)sv.f_bavail * (double)sv.f_frsize / MIB;
    add(o, "disk", free_mb >= limit, floor(free_mb), "MiB", limit,
        "%s: %.0f MiB free of %.0f MiB", path, free_mb,
        (double)sv.f_blocks * (double)sv.f_frsize / MIB);
}

static void check_memory(struct out *o, const struct pl_vetconf *c)
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
        add(o, "memory", false, NAN, "MiB", (double)c->mem_min_mb,
            "/proc/meminfo: no MemAvailable");
        return;
    }
    add(o, "memory", kb / 1024 >= (double)c->mem_min_mb, floor(kb / 1024),
        "MiB", (double)c->mem_min_mb, "%.0f MiB available", kb / 1024);
}

/* ------------------------------------------------------------ cpu */

static double mono(void)
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
static void check_cpu(struct out *o, const struct pl_vetconf *c,
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
        add(o, "cpu", false, NAN, "Mop/s", NAN, "could not run on any of "
            "the node's cores");
        return;
    }
    char quota[80] = "";
    if (held > 0)
        snprintf(quota, sizeof(quota), "; held back by a CPU quota for "
                 "%.2f s", held);
    add(o, "cpu", true, round(worst * 10) / 10, "Mop/s", NAN, "slowest core "
        "%llu: %.1f, fastest core %llu: %.1f Mop/s (%u cores)%s",
        (unsigned long long)worst_id, worst, (unsigned long long)best_id, best,
        done, quota);
}

/* ------------------------------------------------------------ external */

/* Read 'fd' until EOF or 'deadline' (mono()); 0 or -1 (ETIMEDOUT). */
static int read_all(int fd, char **buf, size_t *len, double deadline)
{
    size_t cap = 0;

    *buf = NULL;
    *len = 0;
    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        double left = deadline - mono();
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
            if (cap >= EXT_OUT_MAX) {
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

/* Its JSON's checks into the result: 0, or -1 with 'why'. */
static int ext_json(struct out *o, const char *buf, size_t len, char *why,
                    size_t wlen)
{
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, 0, &jerr), *arr, *e;
    size_t i;

    if (!root || !(arr = json_object_get(root, "checks"))
        || !json_is_array(arr) || json_array_size(arr) == 0) {
        snprintf(why, wlen, "printed no {\"checks\": [...]}%s%s",
                 root ? "" : ": ", root ? "" : jerr.text);
        json_decref(root);
        return -1;
    }
    json_array_foreach(arr, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        json_t *ok = json_object_get(e, "ok");
        json_t *fig = json_object_get(e, "figure");
        json_t *lim = json_object_get(e, "limit");
        const char *unit = json_string_value(json_object_get(e, "unit"));
        const char *detail = json_string_value(json_object_get(e, "detail"));
        if (!name || !pl_vet_name_ok(name) || !json_is_boolean(ok)
            || (fig && !json_is_number(fig) && !json_is_null(fig))
            || (lim && !json_is_number(lim) && !json_is_null(lim))
            || (unit && strlen(unit) > PL_VET_UNIT_MAX)) {
            snprintf(why, wlen, "check %zu: want name (a-z 0-9 _ . -), ok "
                     "(true/false), figure and limit (numbers)", i);
            json_decref(root);
            return -1;
        }
        add(o, name, json_is_true(ok),
            json_is_number(fig) ? json_number_value(fig) : NAN, unit,
            json_is_number(lim) ? json_number_value(lim) : NAN, "%s",
            detail ? detail : "");
    }
    json_decref(root);
    return 0;
}

/* Run 'prog' ('argv', its stdin /dev/null, stderr ours) until it ends
 * or 'timeout' s pass (then killed): its stdout into *buf (malloc'd,
 * may be NULL), its wait status into *status.  0, or -1 with 'why'. */
static int run_prog(const char *prog, char **argv, double timeout,
                    char **buf, size_t *len, int *status, char *why,
                    size_t wlen)
{
    int fds[2] = { -1, -1 }, devnull = -1, rc = 0;
    pid_t pid = -1;
    extern char **environ;

    *buf = NULL;
    *len = 0;
    *status = 0;
    *why = '\0';
    if (pipe2(fds, O_CLOEXEC) < 0
        || (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0
        || (rc = pl_spawn(prog, argv, environ, devnull, fds[1], 2, -1,
                          NULL, &pid))) {
        snprintf(why, wlen, "%s", strerror(rc ? rc : errno));
        goto error;
    }
    close(fds[1]);
    fds[1] = -1;
    if (read_all(fds[0], buf, len, mono() + timeout) < 0) {
        snprintf(why, wlen, "%s", errno == ETIMEDOUT ? "timed out"
                                                     : strerror(errno));
        kill(-pid, SIGKILL);
    }
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    if (!*why && WIFSIGNALED(*status))
        snprintf(why, wlen, "killed by signal %d", WTERMSIG(*status));
    close(fds[0]);
    close(devnull);
    return *why ? -1 : 0;
error:
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (devnull >= 0)
        close(devnull);
    return -1;
}

static void check_external(struct out *o, const struct pl_vet_external *x)
{
    char prog[4096], why[256] = "", *buf = NULL;
    int status = 0, rc;
    size_t len = 0;

    if ((rc = pl_spawn_find(x->argv[0], NULL, prog, sizeof(prog)))) {
        add(o, x->name, false, NAN, NULL, NAN, "%s: %s", x->argv[0],
            strerror(rc));
        return;
    }
    if (run_prog(prog, x->argv, x->timeout, &buf, &len, &status, why,
                 sizeof(why)) < 0) {
        add(o, x->name, false, NAN, NULL, NAN, "%s: %s", x->argv[0], why);
        free(buf);
        return;
    }
    /* a non-zero exit with checks printed: the checks say what failed */
    if (ext_json(o, buf ? buf : "", len, why, sizeof(why)) < 0) {
        if (WIFEXITED(status) && WEXITSTATUS(status))
            snprintf(why + strlen(why), sizeof(why) - strlen(why),
                     " (exit %d)", WEXITSTATUS(status));
        add(o, x->name, false, NAN, NULL, NAN, "%s: %s", x->argv[0], why);
    }
    free(buf);
}

/* ------------------------------------------------------------ gpu health */

/* Into the result, as pl_vet_add_f wants it. */
static void add_cb(void *arg, const char *name, bool ok, double figure,
                   const char *unit, double limit, const char *detail)
{
    add(arg, name, ok, figure, unit, limit, "%s", detail);
}

/* A text member of 'o', or 'dflt'. */
static const char *jtext(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));

    return s ? s : dflt;
}

static double jnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);

    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A pass: one check, the GPU count, with the hottest and least free. */
static void gpu_pass(const json_t *r, pl_vet_add_f addf, void *arg)
{
    char detail[PL_VET_TEXT_MAX];
    const json_t *g;
    double tmax = NAN, fmin = NAN;
    size_t i;

    json_array_foreach(json_object_get(r, "gpus"), i, g) {
        double t = jnum(g, "temperature_c");
        double fr = jnum(g, "memory_free_mb");
        double tot = jnum(g, "memory_total_mb");
        if (!isnan(t) && !(t <= tmax))
            tmax = t;
        if (tot > 0 && !isnan(fr) && !(100 * fr / tot >= fmin))
            fmin = 100 * fr / tot;
    }
    snprintf(detail, sizeof(detail), "%.0f GPUs (driver %.40s), NVML and a "
             "CUDA kernel ok; hottest %.0f C, least free %.1f%%",
             jnum(r, "count"), jtext(r, "driver", "?"), tmax, fmin);
    addf(arg, "gpu", true, jnum(r, "count"), "gpus", jnum(r, "expect"),
         detail);
}

void pl_vet_gpu_adapt(const char *buf, size_t len, int code,
                      pl_vet_add_f addf, void *arg)
{
    json_error_t jerr;
    json_t *r = json_loadb(buf ? buf : "", len, 0, &jerr), *e;
    const char *status;
    char detail[PL_VET_TEXT_MAX];
    size_t i, nf = 0;

    if (!json_is_object(r)) {
        snprintf(detail, sizeof(detail), "pilot-vetcheck gpu exited %d and "
                 "printed no report%s%.200s", code, r ? "" : ": ",
                 r ? "" : jerr.text);
        addf(arg, "gpu", false, NAN, NULL, NAN, detail);
        json_decref(r);
        return;
    }
    status = jtext(r, "status", "");
    if (code == 3 && !strcmp(status, "cannot-run")) {
        /* no GPU library at all (the dev cluster's fake GPUs, a node
         * without the driver's user space): nothing to judge the GPUs
         * by; a library that loaded and failed is the node's fault */
        bool no_lib = json_is_true(json_object_get(r, "no_nvml"));
        snprintf(detail, sizeof(detail), "%s%.400s", no_lib ? "not checked: "
                 : "", jtext(r, "error", "cannot run, no reason given"));
        addf(arg, "gpu", no_lib, NAN, NULL, NAN, detail);
    }
    else if (code == 0 && !strcmp(status, "pass")
             && json_is_true(json_object_get(r, "ok")))
        gpu_pass(r, addf, arg);
    else {
        json_array_foreach(json_object_get(r, "failed"), i, e) {
            const char *name = jtext(e, "check", "gpu");
            snprintf(detail, sizeof(detail), "%.400s", jtext(e, "text", ""));
            addf(arg, pl_vet_name_ok(name) ? name : "gpu", false,
                 jnum(e, "value"), NULL, jnum(e, "limit"), detail);
            if (++nf >= PL_VET_MAX_CHECKS / 2)
                break; /* a report of thousands: the first say enough */
        }
        if (!nf) {
            snprintf(detail, sizeof(detail), "pilot-vetcheck gpu exited %d "
                     "(status '%.32s') and named no failed check %.300s",
                     code, status, jtext(r, "error", ""));
            addf(arg, "gpu", false, NAN, NULL, NAN, detail);
        }
    }
    json_decref(r);
}

/* Where pilot-vetcheck is: $PILOT_VETCHECK, else beside our program (as
 * the pool's pilot-worker is).  0, or -1. */
static int find_vetcheck(char *path, size_t len)
{
    const char *env = getenv("PILOT_VETCHECK");
    char exe[PL_PATH_MAX];
    ssize_t n;

    if (env && *env) {
        snprintf(path, len, "%s", env);
        return access(path, X_OK);
    }
    snprintf(path, len, "/proc/self/exe");
    if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) <= 0)
        return -1;
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(path, len, "%s/pilot-vetcheck", exe);
    return access(path, X_OK);
}

/* The granted GPUs' health: `pilot-vetcheck gpu --expect N` (NVML, a CUDA
 * kernel), its report turned into checks. */
static void check_gpu_health(struct out *o, const struct pl_vetconf *c,
                             size_t granted, double left)
{
    char prog[PL_PATH_MAX + 32], expect[32], pct[32], temp[32];
    char why[256] = "", *buf = NULL;
    char a_gpu[] = "gpu", a_expect[] = "--expect", a_pct[] = "--min-free-pct",
         a_temp[] = "--max-temp";
    char *argv[] = { prog, a_gpu, a_expect, expect, a_pct, pct, a_temp, temp,
                     NULL };
    int status = 0;
    size_t len = 0;

    if (find_vetcheck(prog, sizeof(prog)) < 0) {
        /* an installation without it is not the node's fault */
        add(o, "gpu", true, NAN, NULL, NAN, "not checked: no "
            "pilot-vetcheck (%s)", prog);
        return;
    }
    snprintf(expect, sizeof(expect), "%zu", granted);
    snprintf(pct, sizeof(pct), "%g", c->gpu_min_free_pct);
    snprintf(temp, sizeof(temp), "%g", c->gpu_max_temp);
    /* within what is left of the checks' timeout: a program that hangs
     * fails this check, not the whole vetting */
    if (run_prog(prog, argv, left > 1 ? left : 1, &buf, &len, &status, why,
                 sizeof(why)) < 0)
        add(o, "gpu", false, NAN, NULL, NAN, "pilot-vetcheck gpu: %s", why);
    else
        pl_vet_gpu_adapt(buf, len, WIFEXITED(status) ? WEXITSTATUS(status)
                                                     : -1, add_cb, o);
    free(buf);
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
    struct out o = { 0 };
    uint64_t token;
    struct pl_wbuf w;
    double t0 = mono();

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
    if (read_all(0, &in, &inlen, mono() + 60) < 0 || !in
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
            check_gpu_health(&o, &c, ng, c.timeout - (mono() - t0) - 1);
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
        check_external(&o, &c.ext[i]);
    o.r.node = (char *)node;
    o.r.token = token;
    o.r.time = pl_now();
    o.r.took = mono() - t0;
    pl_vet_result_encode(&w, 0, &o.r);
    int rc = write_all(1, w.sb.data, w.sb.size) < 0 ? 1 : 0;
    pl_wbuf_destroy(&w);
    o.r.node = NULL;
    pl_vet_result_clear(&o.r);
    pl_vetconf_clear(&c);
    return rc;
}
