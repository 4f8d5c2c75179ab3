/* agent/resources.c - what this node offers (name, cores, GPUs), and which
 * of it running tasks hold */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/resources.h"
#include "proto/log.h"
#include "proto/strv.h"

#define WORDS (PL_CPU_MAX / 64)

struct pl_resources {
    char node[256];
    uint64_t *cores;       /* ascending CPU ids */
    uint32_t ncores;
    uint64_t ours[WORDS];  /* bit per CPU id: in 'cores' */
    uint64_t busy[WORDS];  /* bit per CPU id: held by a task */
    size_t nbusy_cores;
    char **gpu_ids;        /* Slurm's names, NULL-terminated */
    char **gpu_visible;    /* our CUDA_VISIBLE_DEVICES entries, same length */
    struct pl_gpuprobe_dev *gpu_dev; /* the library's facts, same length;
                                        NULL without a library */
    size_t ngpus;
    bool *gpu_busy;        /* by position */
    size_t nbusy_gpus;
};

static bool bit(const uint64_t *set, uint64_t i)
{
    return (set[i / 64] >> (i % 64)) & 1;
}

static void bit_set(uint64_t *set, uint64_t i, bool on)
{
    if (on)
        set[i / 64] |= (uint64_t)1 << (i % 64);
    else
        set[i / 64] &= ~((uint64_t)1 << (i % 64));
}

/* Read a CPU id at *s, advancing *s.  -1 if there is no number or it is
 * too large. */
static long cpu_number(const char **s)
{
    char *end;
    long v;

    if (**s < '0' || **s > '9')
        return -1;
    errno = 0;
    v = strtol(*s, &end, 10);
    if (errno || v >= PL_CPU_MAX)
        return -1;
    *s = end;
    return v;
}

int pl_cpulist_parse(const char *s, uint64_t **v, uint32_t *n,
                     struct pl_error *errp)
{
    uint64_t set[WORDS] = { 0 };
    const char *p = s;
    uint64_t *out;
    uint32_t count = 0;

    while (*p) {
        long lo, hi;
        if ((lo = cpu_number(&p)) < 0)
            goto bad;
        hi = lo;
        if (*p == '-') {
            p++;
            if ((hi = cpu_number(&p)) < lo)
                goto bad;
        }
        if (*p == ',' && p[1] != '\0')
            p++;
        else if (*p != '\0')
            goto bad;
        for (long i = lo; i <= hi; i++)
            bit_set(set, (uint64_t)i, true);
    }
    if (!(out = calloc(PL_CPU_MAX, sizeof(*out)))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    for (uint64_t i = 0; i < PL_CPU_MAX; i++)
        if (bit(set, i))
            out[count++] = i;
    *v = out;
    *n = count;
    return 0;
bad:
    errno = EINVAL;
    return pl_errprintf(errp, "bad CPU list '%s' (want ids below %d, "
                        "like 0,1,4-7)", s, PL_CPU_MAX);
}

char **pl_idlist_split(const char *s)
{
    size_t max = 1;
    char **v;
    size_t n = 0;

    for (const char *p = s; p && *p; p++)
        if (*p == ',')
            max++;
    if (!(v = calloc(max + 1, sizeof(*v))))
        return NULL;
    for (const char *p = s; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len > 0 && !(v[n++] = strndup(p, len))) {
            pl_strv_free(v);
            errno = ENOMEM;
            return NULL;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return v;
}

char *pl_idlist_format(char *buf, size_t len, const uint64_t *v, size_t n)
{
    size_t off = 0;

    if (len == 0)
        return buf;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(buf + off, len - off, "%s%llu", i ? "," : "",
                         (unsigned long long)v[i]);
        if (w < 0 || (size_t)w >= len - off) {
            /* cut back to room for "..." */
            size_t keep = len > 4 ? len - 4 : 0;
            if (off > keep)
                off = keep;
            snprintf(buf + off, len - off, "...");
            break;
        }
        off += (size_t)w;
    }
    return buf;
}

void pl_resources_free(struct pl_resources *r)
{
    if (r) {
        int saved = errno;
        free(r->cores);
        pl_strv_free(r->gpu_ids);
        pl_strv_free(r->gpu_visible);
        free(r->gpu_dev);
        free(r->gpu_busy);
        free(r);
        errno = saved;
    }
}

static int find_node(struct pl_resources *r, const char *node,
                     struct pl_error *errp)
{
    if (node && *node) {
        if (strlen(node) >= sizeof(r->node)) {
            errno = EINVAL;
            return pl_errprintf(errp, "node name too long");
        }
        snprintf(r->node, sizeof(r->node), "%s", node);
        return 0;
    }
    if (gethostname(r->node, sizeof(r->node)) < 0)
        return pl_errprintf(errp, "gethostname: %s", strerror(errno));
    r->node[sizeof(r->node) - 1] = '\0';
    return 0;
}

static int find_cores(struct pl_resources *r, const char *cores,
                      struct pl_error *errp)
{
    if (cores) {
        if (pl_cpulist_parse(cores, &r->cores, &r->ncores, errp) < 0)
            return -1;
    }
    else {
        cpu_set_t mask;
        CPU_ZERO(&mask);
        if (sched_getaffinity(0, sizeof(mask), &mask) < 0)
            return pl_errprintf(errp, "sched_getaffinity: %s",
                                strerror(errno));
        if (!(r->cores = calloc(PL_CPU_MAX, sizeof(*r->cores)))) {
            errno = ENOMEM;
            return pl_errprintf(errp, "out of memory");
        }
        for (int i = 0; i < PL_CPU_MAX; i++)
            if (CPU_ISSET(i, &mask))
                r->cores[r->ncores++] = (uint64_t)i;
    }
    if (r->ncores == 0) {
        errno = EINVAL;
        return pl_errprintf(errp, "no cores");
    }
    for (uint32_t i = 0; i < r->ncores; i++)
        bit_set(r->ours, r->cores[i], true);
    return 0;
}

static bool set_and_full(const char *s)
{
    return s && *s;
}

/* Check the GPUs found so far with what the library found
 * (agent/gpuprobe.h): drop the ones it does not find, copy its facts for
 * the others.  Returns 0, or -1 (ENOMEM) with nothing changed. */
static int check_gpus(struct pl_resources *r,
                      const struct pl_resources_spec *sp, unsigned flags)
{
    size_t found, kept = 0;
    struct pl_error msg;
    long *match;

    if (sp->gpu_lib == PL_GPUPROBE_NONE) {
        pl_log(LOG_INFO, "no GPU library (%s): GPUs from Slurm's variables "
               "alone", sp->gpu_probe);
        return 0;
    }
    if (!(match = calloc(r->ngpus + 1, sizeof(*match))))
        return -1;
    if (!(r->gpu_dev = calloc(r->ngpus + 1, sizeof(*r->gpu_dev)))) {
        free(match);
        return -1;
    }
    found = pl_gpuprobe_check(sp->gpu_lib, sp->gpu_devs, sp->gpu_ndevs,
                              r->gpu_ids, flags, match, &msg);
    if (found < r->ngpus)
        pl_log(LOG_WARNING, "%s", msg.text);
    else if (msg.text[0])
        pl_log(LOG_NOTICE, "%s", msg.text);
    pl_log(LOG_INFO, "GPUs checked with %s: %zu of %zu granted found, "
           "%zu seen", sp->gpu_probe, found, r->ngpus, sp->gpu_ndevs);
    for (size_t i = 0; i < r->ngpus; i++) {
        if (match[i] < 0) {
            free(r->gpu_ids[i]);
            free(r->gpu_visible[i]);
            continue;
        }
        r->gpu_ids[kept] = r->gpu_ids[i];
        r->gpu_visible[kept] = r->gpu_visible[i];
        r->gpu_dev[kept] = sp->gpu_devs[match[i]];
        kept++;
    }
    for (size_t i = kept; i < r->ngpus; i++)
        r->gpu_ids[i] = r->gpu_visible[i] = NULL;
    r->ngpus = kept;
    free(match);
    return 0;
}

static int find_gpus(struct pl_resources *r, const struct pl_resources_spec *sp,
                     struct pl_error *errp)
{
    const char *cvd = sp->cuda_visible;
    const char *src;
    size_t nids, nvis;

    /* Slurm sets CUDA_VISIBLE_DEVICES=NoDevFiles for a GRES with no device
     * files: there is nothing to renumber, so take it as unset. */
    if (cvd && !strcmp(cvd, "NoDevFiles"))
        cvd = NULL;
    if (set_and_full(sp->step_gpus))
        src = sp->step_gpus;
    else if (set_and_full(sp->job_gpus))
        src = sp->job_gpus;
    else
        src = cvd;
    if (!(r->gpu_ids = pl_idlist_split(src))
        || !(r->gpu_visible = cvd ? pl_idlist_split(cvd)
                                  : pl_strv_dup(r->gpu_ids)))
        goto nomem;
    nids = pl_strv_len(r->gpu_ids);
    nvis = pl_strv_len(r->gpu_visible);
    if (nids != nvis) {
        pl_log(LOG_WARNING, "GPU ids '%s' and CUDA_VISIBLE_DEVICES '%s' "
               "differ in length: using %zu GPUs", src, cvd,
               nids < nvis ? nids : nvis);
        char **longer = nids > nvis ? r->gpu_ids : r->gpu_visible;
        size_t n = nids < nvis ? nids : nvis;
        for (size_t i = n; longer[i]; i++) {
            free(longer[i]);
            longer[i] = NULL;
        }
    }
    r->ngpus = nids < nvis ? nids : nvis;
    if (sp->gpu_probe) {
        unsigned flags = 0;
        if (set_and_full(sp->step_gpus) || set_and_full(sp->job_gpus))
            flags |= PL_GPUPROBE_SLURM_IDS;
        if (cvd)
            flags |= PL_GPUPROBE_CUDA_VISIBLE;
        if (check_gpus(r, sp, flags) < 0)
            goto nomem;
    }
    if (!(r->gpu_busy = calloc(r->ngpus + 1, sizeof(*r->gpu_busy))))
        goto nomem;
    return 0;
nomem:
    errno = ENOMEM;
    return pl_errprintf(errp, "out of memory");
}

struct pl_resources *pl_resources_new(const struct pl_resources_spec *spec,
                                      struct pl_error *errp)
{
    struct pl_resources *r;

    if (!(r = calloc(1, sizeof(*r)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    if (find_node(r, spec->node, errp) < 0
        || find_cores(r, spec->cores, errp) < 0
        || find_gpus(r, spec, errp) < 0)
        goto error;
    return r;
error:
    pl_resources_free(r);
    return NULL;
}

const char *pl_resources_node(const struct pl_resources *r)
{
    return r->node;
}

const uint64_t *pl_resources_cores(const struct pl_resources *r, uint32_t *n)
{
    *n = r->ncores;
    return r->cores;
}

size_t pl_resources_ngpus(const struct pl_resources *r)
{
    return r->ngpus;
}

char *const *pl_resources_gpu_ids(const struct pl_resources *r)
{
    return r->gpu_ids;
}

const char *pl_resources_gpu_visible(const struct pl_resources *r, size_t pos)
{
    return pos < r->ngpus ? r->gpu_visible[pos] : NULL;
}

const char *pl_resources_gpu_id(const struct pl_resources *r, size_t pos)
{
    return pos < r->ngpus ? r->gpu_ids[pos] : NULL;
}

const struct pl_gpuprobe_dev *pl_resources_gpu_dev(const struct pl_resources *r,
                                                   size_t pos)
{
    return pos < r->ngpus && r->gpu_dev ? &r->gpu_dev[pos] : NULL;
}

size_t pl_resources_free_cores(const struct pl_resources *r)
{
    return r->ncores - r->nbusy_cores;
}

size_t pl_resources_free_gpus(const struct pl_resources *r)
{
    return r->ngpus - r->nbusy_gpus;
}

int pl_resources_claim(struct pl_resources *r, const uint64_t *cores,
                       uint32_t ncores, const uint64_t *gpus, uint32_t ngpus,
                       struct pl_error *errp)
{
    uint64_t seen[WORDS] = { 0 };

    for (uint32_t i = 0; i < ncores; i++) {
        uint64_t c = cores[i];
        if (c >= PL_CPU_MAX || !bit(r->ours, c)) {
            errno = EINVAL;
            return pl_errprintf(errp, "core %llu is not on this agent",
                                (unsigned long long)c);
        }
        if (bit(seen, c)) {
            errno = EINVAL;
            return pl_errprintf(errp, "core %llu listed twice",
                                (unsigned long long)c);
        }
        if (bit(r->busy, c)) {
            errno = EBUSY;
            return pl_errprintf(errp, "core %llu is busy",
                                (unsigned long long)c);
        }
        bit_set(seen, c, true);
    }
    for (uint32_t i = 0; i < ngpus; i++) {
        if (gpus[i] >= r->ngpus) {
            errno = EINVAL;
            return pl_errprintf(errp, "GPU position %llu: the agent has %zu "
                                "GPUs", (unsigned long long)gpus[i],
                                r->ngpus);
        }
        for (uint32_t j = 0; j < i; j++) {
            if (gpus[j] == gpus[i]) {
                errno = EINVAL;
                return pl_errprintf(errp, "GPU position %llu listed twice",
                                    (unsigned long long)gpus[i]);
            }
        }
        if (r->gpu_busy[gpus[i]]) {
            errno = EBUSY;
            return pl_errprintf(errp, "GPU position %llu is busy",
                                (unsigned long long)gpus[i]);
        }
    }
    for (uint32_t i = 0; i < ncores; i++)
        bit_set(r->busy, cores[i], true);
    for (uint32_t i = 0; i < ngpus; i++)
        r->gpu_busy[gpus[i]] = true;
    r->nbusy_cores += ncores;
    r->nbusy_gpus += ngpus;
    return 0;
}

void pl_resources_release(struct pl_resources *r, const uint64_t *cores,
                          uint32_t ncores, const uint64_t *gpus,
                          uint32_t ngpus)
{
    for (uint32_t i = 0; i < ncores; i++) {
        if (cores[i] < PL_CPU_MAX && bit(r->busy, cores[i])) {
            bit_set(r->busy, cores[i], false);
            r->nbusy_cores--;
        }
    }
    for (uint32_t i = 0; i < ngpus; i++) {
        if (gpus[i] < r->ngpus && r->gpu_busy[gpus[i]]) {
            r->gpu_busy[gpus[i]] = false;
            r->nbusy_gpus--;
        }
    }
}
