/* agent/vetcheck.c - pilot-vetcheck's report, exit codes, usage and
 * options, shared by its checks (agent/vetcheck.h) */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/vetcheck.h"

static const struct {
    const char *name;
    const char *usage;
} usages[] = {
    { "gpu",
      "gpu [--expect N] [--min-free-mb M] [--min-free-pct P]\n"
      "        [--max-temp C] [--min-kernel-gbs G] [--size ELEMENTS]\n"
      "        [--print-ptx]\n"
      "    this node's GPUs (those CUDA_VISIBLE_DEVICES leaves, as the CUDA\n"
      "    driver counts them) through NVML: count, memory free, temperature;\n"
      "    then on each a CUDA kernel (y = a*x + b over 1M floats) through\n"
      "    the CUDA driver, checked element by element and timed.\n"
      "    Defaults: --min-free-pct 90, --max-temp 85, no --expect.\n" },
    { "net",
      "net [--size BYTES] [--iters N] [--max-latency-us U]\n"
      "        [--min-bandwidth-mbs B]\n"
      "    an MPI job of one rank per node (srun --mpi=pmix\n"
      "    --ntasks-per-node=1): ping-pong between every pair of ranks, in\n"
      "    rounds of disjoint pairs: latency (8 bytes, N round trips) and\n"
      "    bandwidth (BYTES, N/5 round trips); rank 0 prints the report.\n"
      "    Defaults: --size 4M, --iters 100, no thresholds.\n" },
    { "nccl",
      "nccl [--size BYTES] [--iters N] [--min-busbw-gbs G]\n"
      "    an MPI job of one rank per GPU: NCCL all-reduce (float sum) of\n"
      "    BYTES, checked, then timed over N iterations; bus bandwidth as\n"
      "    nccl-tests define it (algbw x 2(n-1)/n).\n"
      "    Defaults: --size 64M, --iters 20, no threshold.\n" },
};

void pl_vet_usage(FILE *f, const char *check)
{
    fprintf(f, "usage: pilot-vetcheck CHECK [OPTIONS]\n");
    for (size_t i = 0; i < sizeof(usages) / sizeof(usages[0]); i++)
        if (!check || !strcmp(check, usages[i].name))
            fprintf(f, "  pilot-vetcheck %s", usages[i].usage);
    if (!check)
        fprintf(f, "exit: 0 passed, 1 a check failed, 2 usage, 3 the check "
                   "cannot run here\n");
}

int pl_vet_init(struct pl_vet *v, const char *check)
{
    char host[256];

    memset(v, 0, sizeof(*v));
    v->check = check;
    if (gethostname(host, sizeof(host)) < 0)
        snprintf(host, sizeof(host), "?");
    host[sizeof(host) - 1] = '\0';
    if (!(v->out = json_object()) || !(v->failed = json_array())
        || json_object_set_new(v->out, "check", json_string(check)) < 0
        || json_object_set_new(v->out, "host", json_string(host)) < 0
        || json_object_set(v->out, "failed", v->failed) < 0)
        goto error;
    return 0;
error:
    pl_vet_free(v);
    errno = ENOMEM;
    return -1;
}

void pl_vet_free(struct pl_vet *v)
{
    int e = errno;

    json_decref(v->failed);
    json_decref(v->out);
    v->failed = v->out = NULL;
    errno = e;
}

/* A figure for the report: null when it is not known (NaN). */
static json_t *figure(double x)
{
    return isnan(x) ? json_null() : json_real(x);
}

void pl_vet_fail(struct pl_vet *v, const char *name, double value,
                 double limit, json_t *where, const char *fmt, ...)
{
    char text[512];
    json_t *f = json_object();
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    fprintf(stderr, "pilot-vetcheck: %s: FAILED %s: %s\n", v->check, name,
            text);
    v->nfailed++; /* out of memory: the exit code still says so */
    if (f) {
        json_object_set_new(f, "check", json_string(name));
        json_object_set_new(f, "value", figure(value));
        json_object_set_new(f, "limit", figure(limit));
        if (where)
            json_object_update(f, where);
        json_object_set_new(f, "text", json_string(text));
        json_array_append_new(v->failed, f);
    }
    json_decref(where);
}

void pl_vet_cannot(struct pl_vet *v, const char *fmt, ...)
{
    char text[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    fprintf(stderr, "pilot-vetcheck: %s: cannot run here: %s\n", v->check,
            text);
    json_object_set_new(v->out, "error", json_string(text));
    v->cannot = 1;
}

int pl_vet_end(struct pl_vet *v)
{
    /* a check that failed says more of the node than one that could not
     * run (the GPU check that finds a GPU too hot, then no CUDA driver) */
    int rc = v->nfailed  ? PL_VET_FAIL
             : v->cannot ? PL_VET_CANNOT
                         : PL_VET_PASS;
    static const char *const status[] = {
        [PL_VET_PASS] = "pass",
        [PL_VET_FAIL] = "fail",
        [PL_VET_CANNOT] = "cannot-run",
    };
    char *s;

    json_object_set_new(v->out, "status", json_string(status[rc]));
    json_object_set_new(v->out, "ok", json_boolean(rc == PL_VET_PASS));
    if (!(s = json_dumps(v->out, JSON_COMPACT | JSON_REAL_PRECISION(6)))) {
        fprintf(stderr, "pilot-vetcheck: %s: out of memory for the report\n",
                v->check);
        rc = rc == PL_VET_PASS ? PL_VET_FAIL : rc;
    } else {
        printf("%s\n", s);
        free(s);
    }
    if (fflush(stdout) != 0 && rc == PL_VET_PASS)
        rc = PL_VET_FAIL; /* a report that is lost passes nothing */
    pl_vet_free(v);
    return rc;
}

int pl_vet_number(const char *opt, const char *s, double min, double max,
                  int size, double *out)
{
    char *end;
    double x;

    errno = 0;
    x = strtod(s, &end);
    if (size && end != s && *end && !end[1]) {
        switch (*end) {
        case 'k': case 'K': x *= 1024; end++; break;
        case 'm': case 'M': x *= 1024 * 1024; end++; break;
        case 'g': case 'G': x *= 1024.0 * 1024 * 1024; end++; break;
        }
    }
    if (end == s || *end || errno || isnan(x) || x < min || x > max) {
        fprintf(stderr, "pilot-vetcheck: %s: '%s' is not a number in "
                        "[%g, %g]\n", opt, s, min, max);
        return -1;
    }
    *out = x;
    return 0;
}

int pl_vet_partner(int me, int r, int m)
{
    if (me == m - 1)
        return r;
    if (me == r)
        return m - 1;
    return ((2 * r - me) % (m - 1) + (m - 1)) % (m - 1);
}
