/* agent/gpusample.c - the GPU use of the running tasks: NVML sampled
 * every few seconds by a child process, averaged per task rank
 * (agent/gpusample.h; the child is agent/nvmlsample.c) */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/gpusample.h"
#include "proto/log.h"

#define MAX_GPUS 64     /* the child lists no more */
#define LINE_BYTES 4096   /* a sample of 64 GPUs is some 1.5 KiB */

/* One rank holding GPUs, and its sums so far. */
struct watch {
    uint64_t id, attempt, rank;
    uint32_t pos[MAX_GPUS]; /* its GPUs: positions in the node's list */
    uint32_t npos;
    double util, power;     /* sums over its GPUs and the samples */
    uint64_t nutil, npower;
    double mem;             /* the most one of its GPUs held, MB */
    bool has_mem;
};

struct pl_gpusample {
    uv_loop_t *loop;
    const struct pl_resources *res;
    uv_process_t proc;
    uv_pipe_t out;          /* the child's stdout */
    bool started;           /* 'proc' and 'out' initialised */
    bool exited;
    int closing;            /* handles whose close callback is due */
    int pid;
    bool ready;
    char why[256];          /* why it samples nothing, "" if it does */
    int pos_of[MAX_GPUS];   /* the child's device i: our GPU position, or
                               -1 (not one of ours) */
    char buf[LINE_BYTES];     /* read, not yet a whole line */
    size_t len;
    bool skip;              /* drop up to the next newline (a line too
                               long: not the child's) */
    struct watch *w;
    size_t nw, capw;
};

struct pl_gpusample *pl_gpusample_new(uv_loop_t *loop,
                                      const struct pl_resources *res)
{
    struct pl_gpusample *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->loop = loop;
    s->res = res;
    for (int i = 0; i < MAX_GPUS; i++)
        s->pos_of[i] = -1;
    snprintf(s->why, sizeof(s->why), "not started");
    return s;
}

static void close_cb(uv_handle_t *h)
{
    struct pl_gpusample *s = h->data;

    if (--s->closing == 0) {
        free(s->w);
        free(s);
    }
}

void pl_gpusample_free(struct pl_gpusample *s)
{
    if (!s)
        return;
    int saved = errno;
    if (!s->started) {
        free(s->w);
        free(s);
        errno = saved;
        return;
    }
    if (!s->exited)
        (void)uv_process_kill(&s->proc, SIGTERM);
    s->closing = 2;
    uv_close((uv_handle_t *)&s->proc, close_cb);
    uv_close((uv_handle_t *)&s->out, close_cb);
    errno = saved;
}

bool pl_gpusample_child(const struct pl_gpusample *s, int pid)
{
    return s && s->started && !s->exited && s->pid == pid;
}

const char *pl_gpusample_why(const struct pl_gpusample *s)
{
    return s->why;
}

bool pl_gpusample_ready(const struct pl_gpusample *s)
{
    return s->ready;
}

/* ---- the child's lines ---- */

/* "gpu IDX UUID": which of our GPUs the child's device IDX is. */
static void on_gpu(struct pl_gpusample *s, const char *args)
{
    unsigned idx;
    char uuid[100];
    size_t n = pl_resources_ngpus(s->res);

    if (sscanf(args, "%u %99s", &idx, uuid) != 2 || idx >= MAX_GPUS)
        return;
    for (size_t pos = 0; pos < n; pos++) {
        const struct pl_gpuprobe_dev *d = pl_resources_gpu_dev(s->res, pos);
        if (d && d->uuid[0] && !strcmp(d->uuid, uuid)) {
            s->pos_of[idx] = (int)pos;
            return;
        }
    }
}

static void on_ready(struct pl_gpusample *s)
{
    int mapped = 0;

    for (int i = 0; i < MAX_GPUS; i++)
        mapped += s->pos_of[i] >= 0;
    s->ready = true;
    s->why[0] = '\0';
    if (mapped == 0)
        snprintf(s->why, sizeof(s->why), "NVML sees none of this node's "
                 "GPUs by UUID");
    pl_log(mapped ? LOG_INFO : LOG_NOTICE, "GPU sampling: %s%d of the "
           "node's %zu GPUs", mapped ? "" : "off: ", mapped,
           pl_resources_ngpus(s->res));
}

/* One device's figures of a sample: to the ranks that hold it. */
static void add(struct pl_gpusample *s, int pos, bool hu, double util,
                bool hm, double mem, bool hp, double power)
{
    for (size_t i = 0; i < s->nw; i++) {
        struct watch *w = &s->w[i];
        for (uint32_t k = 0; k < w->npos; k++) {
            if ((int)w->pos[k] != pos)
                continue;
            if (hu) {
                w->util += util;
                w->nutil++;
            }
            if (hm && (!w->has_mem || mem > w->mem)) {
                w->mem = mem;
                w->has_mem = true;
            }
            if (hp) {
                w->power += power;
                w->npower++;
            }
        }
    }
}

/* A figure of a sample: 1 (a number in [0, max] into *v), 0 ('-': NVML
 * had none), -1 (not one of the child's). */
static int figure(const char *s, double max, double *v)
{
    char *end;

    if (!strcmp(s, "-"))
        return 0;
    errno = 0;
    *v = strtod(s, &end);
    return !errno && end != s && !*end && *v >= 0 && *v <= max ? 1 : -1;
}

/* "sample IDX:UTIL:MEM:POWER ..." */
static void on_sample(struct pl_gpusample *s, char *args)
{
    char *save = NULL;

    for (char *tok = strtok_r(args, " ", &save); tok;
         tok = strtok_r(NULL, " ", &save)) {
        char *f[4], *p = tok;
        int nf = 0;
        while (nf < 4 && p) {
            f[nf++] = p;
            if ((p = strchr(p, ':')))
                *p++ = '\0';
        }
        char *end;
        unsigned long idx = strtoul(f[0], &end, 10);
        if (nf != 4 || p || *end || end == f[0] || idx >= MAX_GPUS
            || s->pos_of[idx] < 0)
            continue;
        double u = 0, m = 0, w = 0;
        int hu = figure(f[1], 100, &u);
        int hm = figure(f[2], PL_USAGE_GPU_MEM_MAX, &m);
        int hp = figure(f[3], PL_USAGE_GPU_POWER_MAX, &w);
        if (hu >= 0 && hm >= 0 && hp >= 0)
            add(s, s->pos_of[idx], hu, u, hm, m, hp, w);
    }
}

void pl_gpusample_feed(struct pl_gpusample *s, const char *line)
{
    char copy[LINE_BYTES];

    snprintf(copy, sizeof(copy), "%s", line);
    if (!strncmp(copy, "sample ", 7))
        on_sample(s, copy + 7);
    else if (!strncmp(copy, "gpu ", 4))
        on_gpu(s, copy + 4);
    else if (!strncmp(copy, "ready", 5))
        on_ready(s);
    else if (!strncmp(copy, "error ", 6)) {
        snprintf(s->why, sizeof(s->why), "%.*s", (int)sizeof(s->why) - 1,
                 copy + 6);
        s->ready = false;
        pl_log(LOG_NOTICE, "GPU sampling: off: %s", s->why);
    }
}

/* ---- the pipe and the child ---- */

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    struct pl_gpusample *s = h->data;

    (void)hint;
    *b = uv_buf_init(s->buf + s->len, (unsigned)(sizeof(s->buf) - s->len));
}

static void read_cb(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    struct pl_gpusample *s = st->data;

    (void)b;
    if (n < 0) {
        uv_read_stop(st);
        return;
    }
    s->len += (size_t)n;
    char *start = s->buf, *nl;
    while ((nl = memchr(start, '\n', s->len - (size_t)(start - s->buf)))) {
        *nl = '\0';
        if (!s->skip)
            pl_gpusample_feed(s, start);
        s->skip = false;
        start = nl + 1;
    }
    s->len -= (size_t)(start - s->buf);
    memmove(s->buf, start, s->len);
    if (s->len == sizeof(s->buf)) {
        s->len = 0; /* a line longer than any of the child's */
        s->skip = true;
    }
}

static void exit_cb(uv_process_t *p, int64_t status, int sig)
{
    struct pl_gpusample *s = p->data;

    s->exited = true;
    s->ready = false;
    if (!s->why[0] || !strcmp(s->why, "not started")) {
        snprintf(s->why, sizeof(s->why), "the sampler exited (status %lld, "
                 "signal %d)", (long long)status, sig);
        pl_log(LOG_WARNING, "GPU sampling: off: %s", s->why);
    }
}

int pl_gpusample_start(struct pl_gpusample *s, const char *prog,
                       double interval, struct pl_error *errp)
{
    char ms[32];
    char *args[] = { (char *)prog, (char *)"--gpu-sampler", ms, NULL };
    uv_stdio_container_t io[3];
    uv_process_options_t o = { 0 };
    int rc;

    if (s->started || interval < 0.01 || interval > 3600) {
        errno = EINVAL;
        return pl_errprintf(errp, "GPU sampler: bad interval %g s",
                            interval);
    }
    snprintf(ms, sizeof(ms), "%ld", (long)(interval * 1000 + 0.5));
    uv_pipe_init(s->loop, &s->out, 0);
    s->out.data = s->proc.data = s;
    io[0].flags = UV_IGNORE;
    io[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    io[1].data.stream = (uv_stream_t *)&s->out;
    io[2].flags = UV_INHERIT_FD; /* its stderr: ours, the agent's log */
    io[2].data.fd = 2;
    o.file = prog;
    o.args = args;
    o.exit_cb = exit_cb;
    o.stdio = io;
    o.stdio_count = 3;
    if ((rc = uv_spawn(s->loop, &s->proc, &o)) < 0) {
        /* uv_spawn() leaves a handle to close even when it fails */
        s->started = true;
        s->exited = true;
        snprintf(s->why, sizeof(s->why), "spawn %s: %s", prog,
                 uv_strerror(rc));
        errno = -rc;
        return pl_errprintf(errp, "GPU sampler: %s", s->why);
    }
    s->started = true;
    s->pid = s->proc.pid;
    s->why[0] = '\0';
    if ((rc = uv_read_start((uv_stream_t *)&s->out, alloc_cb, read_cb)) < 0)
        pl_log(LOG_WARNING, "GPU sampler: read: %s", uv_strerror(rc));
    return 0;
}

/* ---- the ranks ---- */

void pl_gpusample_watch(struct pl_gpusample *s, uint64_t id,
                        uint64_t attempt, uint64_t rank, const uint64_t *gpus,
                        uint32_t n)
{
    struct watch *w;

    if (!s || s->exited || n == 0)
        return;
    if (s->nw == s->capw) {
        size_t cap = s->capw ? s->capw * 2 : 8;
        struct watch *nw = realloc(s->w, cap * sizeof(*nw));
        if (!nw)
            return;
        s->w = nw;
        s->capw = cap;
    }
    w = &s->w[s->nw++];
    *w = (struct watch){ .id = id, .attempt = attempt, .rank = rank };
    for (uint32_t i = 0; i < n && w->npos < MAX_GPUS; i++)
        w->pos[w->npos++] = (uint32_t)gpus[i];
}

void pl_gpusample_take(struct pl_gpusample *s, uint64_t id, uint64_t attempt,
                       uint64_t rank, struct pl_usage *u)
{
    for (size_t i = 0; s && i < s->nw; i++) {
        struct watch *w = &s->w[i];
        if (w->id != id || w->attempt != attempt || w->rank != rank)
            continue;
        if (w->nutil) {
            u->gpu_util = w->util / (double)w->nutil;
            u->has |= PL_USE_GPU_UTIL;
        }
        if (w->has_mem) {
            u->gpu_mem_mb = w->mem;
            u->has |= PL_USE_GPU_MEM;
        }
        if (w->npower) {
            u->gpu_power_w = w->power / (double)w->npower;
            u->has |= PL_USE_GPU_POWER;
        }
        s->w[i] = s->w[--s->nw];
        return;
    }
}
