/* proto/agentmsg.c - what pilotd and its agents say to each other, but RUN */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agentmsg.h"
#include "proto/poolmsg.h"
#include "proto/run.h"
#include "proto/spec.h"
#include "proto/state.h"
#include "proto/strv.h"

static int bad(struct pl_error *errp, const char *what)
{
    errno = EPROTO;
    return pl_errprintf(errp, "%s", what);
}

bool pl_node_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > PL_NODE_NAME_MAX)
        return false;
    for (; *s; s++)
        if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z')
            && !(*s >= '0' && *s <= '9') && !strchr("._-", *s))
            return false;
    return true;
}

bool pl_gpu_id_ok(const char *s)
{
    if (!*s || strlen(s) > PL_GPU_ID_MAX)
        return false;
    for (; *s; s++)
        if (*s <= ' ' || *s > '~' || *s == ',' || *s == ';')
            return false;
    return true;
}

/* ------------------------------------------------------------ events */

void pl_event_init(struct pl_event *e, uint64_t id, uint64_t attempt,
                   uint64_t rank, int state, double time)
{
    *e = (struct pl_event){ .id = id, .attempt = attempt, .rank = rank,
                            .state = state, .time = time, .pid = -1,
                            .exit_code = -1, .signal = -1,
                            .maxrss_kb = -1, .result_size = -1 };
}

const char *pl_pyr_name(int status)
{
    return status == PL_PYR_OK ? "ok" : status == PL_PYR_RAISED ? "raised"
                                                                 : NULL;
}

int pl_pyr_parse(const char *s)
{
    return !s ? -1 : !strcmp(s, "ok") ? PL_PYR_OK
                   : !strcmp(s, "raised") ? PL_PYR_RAISED : -1;
}

/* The figures of 'u' that were measured, each as a double. */
static void usage_encode(struct pl_wmap *m, const struct pl_usage *u)
{
    if (u->has & PL_USE_CPU) {
        pl_wm_double(m, "cpu_user", u->cpu_user);
        pl_wm_double(m, "cpu_sys", u->cpu_sys);
    }
    if (u->has & PL_USE_GPU_UTIL)
        pl_wm_double(m, "gpu_util", u->gpu_util);
    if (u->has & PL_USE_GPU_MEM)
        pl_wm_double(m, "gpu_mem_mb", u->gpu_mem_mb);
    if (u->has & PL_USE_GPU_POWER)
        pl_wm_double(m, "gpu_power_w", u->gpu_power_w);
}

/* One figure 'key' of an event, if there: a number, finite, within
 * [0, max], else EPROTO.  Sets 'bit' in u->has when present. */
static int usage_field(const msgpack_object *o, const char *key, double max,
                       unsigned bit, double *v, struct pl_usage *u,
                       struct pl_error *errp)
{
    int has = pl_mp_double(o, key, false, v, errp);

    if (has <= 0)
        return has;
    if (!isfinite(*v) || *v < 0 || *v > max) {
        errno = EPROTO;
        return pl_errprintf(errp, "field '%s': %g is not in [0, %g]", key,
                            *v, max);
    }
    u->has |= bit;
    return 0;
}

/* An event's CPU and GPU figures into 'u' (cleared first); cpu_user and
 * cpu_sys come together or not at all. */
static int usage_decode(const msgpack_object *o, struct pl_usage *u,
                        struct pl_error *errp)
{
    struct pl_usage sys = { 0 };

    *u = (struct pl_usage){ 0 };
    if (usage_field(o, "cpu_user", PL_USAGE_CPU_MAX, PL_USE_CPU,
                    &u->cpu_user, u, errp) < 0
        || usage_field(o, "cpu_sys", PL_USAGE_CPU_MAX, PL_USE_CPU,
                       &u->cpu_sys, &sys, errp) < 0)
        return -1;
    if (u->has != sys.has)
        return bad(errp, "cpu_user and cpu_sys come together");
    if (usage_field(o, "gpu_util", 100, PL_USE_GPU_UTIL, &u->gpu_util, u,
                    errp) < 0
        || usage_field(o, "gpu_mem_mb", PL_USAGE_GPU_MEM_MAX, PL_USE_GPU_MEM,
                       &u->gpu_mem_mb, u, errp) < 0
        || usage_field(o, "gpu_power_w", PL_USAGE_GPU_POWER_MAX,
                       PL_USE_GPU_POWER, &u->gpu_power_w, u, errp) < 0)
        return -1;
    return 0;
}

void pl_event_encode(struct pl_wbuf *w, const struct pl_event *e)
{
    struct pl_wmap m;

    pl_wmap_begin(w, &m);
    pl_wm_uint(&m, "id", e->id);
    pl_wm_uint(&m, "attempt", e->attempt);
    pl_wm_uint(&m, "rank", e->rank);
    pl_wm_str(&m, "state", pl_state_name(e->state));
    pl_wm_double(&m, "time", e->time);
    if (e->pid > 0)
        pl_wm_uint(&m, "pid", (uint64_t)e->pid);
    if (e->exit_code >= 0)
        pl_wm_int(&m, "exit_code", e->exit_code);
    if (e->signal >= 0)
        pl_wm_int(&m, "signal", e->signal);
    if (e->maxrss_kb >= 0)
        pl_wm_uint(&m, "maxrss_kb", (uint64_t)e->maxrss_kb);
    usage_encode(&m, &e->use);
    if (e->error)
        pl_wm_str(&m, "error", e->error);
    if (e->lost)
        pl_wm_bool(&m, "lost", true);
    if (e->ncores)
        pl_wm_uintv(&m, "cores", e->cores, e->ncores);
    if (e->result_status != PL_PYR_NONE) {
        pl_wm_str(&m, "result_status", pl_pyr_name(e->result_status));
        pl_wm_uint(&m, "result_size", (uint64_t)e->result_size);
        if (e->result)
            pl_wm_bin(&m, "result", e->result, e->nresult);
        if (e->result_file)
            pl_wm_str(&m, "result_file", e->result_file);
        if (e->result_repr)
            pl_wm_str(&m, "result_repr", e->result_repr);
    }
}

/* A Python call's result fields into 'e' (checked: a status, and the
 * bytes inline or a file of the size given). */
static int result_decode(const msgpack_object *o, struct pl_event *e,
                         struct pl_error *errp)
{
    const unsigned char *p;
    char *st = NULL;
    uint64_t size;
    size_t n;
    int has;

    if ((has = pl_mp_str(o, "result_status", false, 16, &st, errp)) <= 0)
        return has;
    e->result_status = pl_pyr_parse(st);
    free(st);
    if (e->result_status < 0) {
        e->result_status = PL_PYR_NONE;
        return bad(errp, "bad result_status");
    }
    if (pl_mp_uint(o, "result_size", true, PL_PY_RESULT_MAX, &size, errp) < 0
        || (has = pl_mp_bin(o, "result", false, PL_PY_RESULT_INLINE, &p, &n,
                            errp)) < 0
        || pl_mp_str(o, "result_file", false, PL_RUN_MAX_PATH,
                     &e->result_file, errp) < 0
        || pl_mp_str(o, "result_repr", false, PL_PYR_REPR_MAX,
                     &e->result_repr, errp) < 0)
        return -1;
    e->result_size = (int64_t)size;
    if (has == 1 && (e->result_file || n != size))
        return bad(errp, "a result inline is 'result_size' bytes, and no "
                         "file");
    if (has != 1 && (!e->result_file || e->result_file[0] != '/'))
        return bad(errp, "a result: its bytes, or an absolute file");
    if (has == 1 && !(e->result = malloc(n ? n : 1)))
        return pl_errprintf(errp, "out of memory");
    if (has == 1) {
        memcpy(e->result, p, n);
        e->nresult = n;
    }
    pl_utf8_repair(e->result_repr);
    return 0;
}

void pl_event_clear(struct pl_event *e)
{
    int saved = errno;

    free(e->error);
    free(e->cores);
    free(e->result);
    free(e->result_file);
    free(e->result_repr);
    memset(e, 0, sizeof(*e));
    errno = saved;
}

int pl_event_decode(const msgpack_object *o, struct pl_event *e,
                    struct pl_error *errp)
{
    char *state = NULL;
    uint64_t pid = 0, rss = 0;
    int has_pid = 0, has_rss = 0;

    pl_event_init(e, 0, 0, 0, 0, 0);
    if (o->type != MSGPACK_OBJECT_MAP)
        return bad(errp, "not a map");
    if (pl_mp_uint(o, "id", true, UINT64_MAX, &e->id, errp) < 0
        || pl_mp_uint(o, "attempt", true, UINT32_MAX, &e->attempt, errp) < 0
        || pl_mp_uint(o, "rank", false, UINT32_MAX, &e->rank, errp) < 0
        || pl_mp_str(o, "state", true, 16, &state, errp) < 0
        || pl_mp_double(o, "time", false, &e->time, errp) < 0
        || (has_pid = pl_mp_uint(o, "pid", false, INT32_MAX, &pid, errp)) < 0
        || pl_mp_int(o, "exit_code", false, &e->exit_code, errp) < 0
        || pl_mp_int(o, "signal", false, &e->signal, errp) < 0
        || (has_rss = pl_mp_uint(o, "maxrss_kb", false, INT64_MAX, &rss,
                                 errp)) < 0
        || usage_decode(o, &e->use, errp) < 0
        || pl_mp_str(o, "error", false, 1024, &e->error, errp) < 0
        || pl_mp_bool(o, "lost", false, &e->lost, errp) < 0
        || pl_mp_uintv(o, "cores", false, PL_SPEC_MAX_CPR, PL_RUN_MAX_CPU - 1,
                       &e->cores, &e->ncores, errp) < 0
        || result_decode(o, e, errp) < 0)
        goto error;
    if ((e->state = pl_state_parse(state)) < 0) {
        pl_errprintf(errp, "bad state '%s'", state);
        errno = EPROTO;
        goto error;
    }
    free(state);
    /* what the receiver may take as it is */
    if (e->exit_code < 0 || e->exit_code > INT32_MAX)
        e->exit_code = -1;
    if (e->signal < 0 || e->signal > 255)
        e->signal = -1;
    if (!isfinite(e->time) || e->time <= 0)
        e->time = 0;
    /* the text becomes the task's reason, shown as JSON: a path in it
     * may hold any bytes */
    pl_utf8_repair(e->error);
    e->pid = has_pid ? (int64_t)pid : -1;
    e->maxrss_kb = has_rss ? (int64_t)rss : -1;
    return 0;
error:
    free(state);
    pl_event_clear(e);
    return -1;
}

void pl_events_begin(struct pl_wbuf *w, uint64_t seq, uint32_t n)
{
    pl_wbuf_init(w, PL_MSG_EVENTS, seq);
    msgpack_pack_array(pl_wm_key(&w->body, "events"), n);
}

int pl_events_decode(const msgpack_object *body,
                     const msgpack_object **entries, struct pl_error *errp)
{
    return pl_mp_array(body, "events", true, PL_EVENTS_MAX, entries, errp)
                   < 0
               ? -1
               : 0;
}

/* ------------------------------------------------------------ register */

void pl_register_encode(struct pl_wbuf *w, uint64_t seq,
                        const struct pl_register *r)
{
    struct pl_wmap *b = &w->body;
    msgpack_packer *pk;

    pl_wbuf_init(w, PL_MSG_REGISTER, seq);
    pl_wm_uint(b, "last_run", r->last_run);
    pl_wm_str(b, "node", r->node);
    pl_wm_uint(b, "pid", r->pid);
    pl_wm_uintv(b, "cores", r->cpu, r->ncpu);
    pl_wm_strv(b, "gpus", r->gpus);
    if (r->job)
        pl_wm_uint(b, "job", r->job);
    if (r->job_end > 0)
        pl_wm_double(b, "job_end", r->job_end);
    pk = pl_wm_key(b, "running");
    msgpack_pack_array(pk, r->nrunning);
    for (uint32_t i = 0; i < r->nrunning; i++) {
        struct pl_wmap m;
        pl_wmap_begin(w, &m);
        pl_wm_uint(&m, "id", r->running[i].id);
        pl_wm_uint(&m, "attempt", r->running[i].attempt);
        pl_wm_uint(&m, "rank", r->running[i].rank);
        if (r->running[i].ncores)
            pl_wm_uintv(&m, "cores", r->running[i].cores,
                        r->running[i].ncores);
    }
    /* what ended while pilotd could not commit it (a restarted pilotd) */
    pk = pl_wm_key(b, "ended");
    msgpack_pack_array(pk, r->nended);
    for (uint32_t i = 0; i < r->nended; i++)
        pl_event_encode(w, &r->ended[i]);
}

void pl_register_clear(struct pl_register *r)
{
    int saved = errno;

    free(r->node);
    free(r->cpu);
    pl_strv_free(r->gpus);
    for (uint32_t i = 0; i < r->nrunning; i++)
        free(r->running[i].cores);
    free(r->running);
    for (uint32_t i = 0; i < r->nended; i++)
        pl_event_clear(&r->ended[i]);
    free(r->ended);
    memset(r, 0, sizeof(*r));
    errno = saved;
}

bool pl_register_runs(const struct pl_register *r, uint64_t id,
                      uint64_t attempt, uint64_t rank)
{
    for (uint32_t i = 0; i < r->nrunning; i++)
        if (r->running[i].id == id && r->running[i].attempt == attempt
            && r->running[i].rank == rank)
            return true;
    return false;
}

bool pl_register_ended(const struct pl_register *r, uint64_t id,
                       uint64_t attempt, uint64_t rank)
{
    for (uint32_t i = 0; i < r->nended; i++)
        if (r->ended[i].id == id && r->ended[i].attempt == attempt
            && r->ended[i].rank == rank)
            return true;
    return false;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* Whether the 'n' ids at 'v' are all different (sorts a copy). */
static int unique(const uint64_t *v, uint32_t n, bool *yes)
{
    uint64_t *c = malloc((n ? n : 1) * sizeof(*c));

    if (!c)
        return -1;
    memcpy(c, v, n * sizeof(*c));
    qsort(c, n, sizeof(*c), cmp_u64);
    *yes = true;
    for (uint32_t i = 1; i < n && *yes; i++)
        *yes = c[i] != c[i - 1];
    free(c);
    return 0;
}

/* 'running': [{id, attempt, rank}...] into r->running. */
static int running_decode(const msgpack_object *body, struct pl_register *r,
                          struct pl_error *errp)
{
    const msgpack_object *arr = NULL;

    if (pl_mp_array(body, "running", false, PL_REG_MAX_HELD, &arr, errp) < 0)
        return -1;
    if (!arr || arr->via.array.size == 0)
        return 0;
    if (!(r->running = calloc(arr->via.array.size, sizeof(*r->running)))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *e = &arr->via.array.ptr[i];
        struct pl_held *h = &r->running[i];
        if (e->type != MSGPACK_OBJECT_MAP)
            return bad(errp, "'running': entries must be maps");
        if (pl_mp_uint(e, "id", true, UINT64_MAX, &h->id, errp) < 0
            || pl_mp_uint(e, "attempt", true, UINT32_MAX, &h->attempt, errp)
                   < 0
            || pl_mp_uint(e, "rank", false, UINT32_MAX, &h->rank, errp) < 0)
            return -1;
        r->nrunning++; /* from here on 'cores' is freed with it */
        if (pl_mp_uintv(e, "cores", false, PL_SPEC_MAX_CPR,
                        PL_RUN_MAX_CPU - 1, &h->cores, &h->ncores, errp) < 0)
            return -1;
    }
    return 0;
}

/* 'ended': [event...] into r->ended. */
static int ended_decode(const msgpack_object *body, struct pl_register *r,
                        struct pl_error *errp)
{
    const msgpack_object *arr = NULL;
    struct pl_error e2;

    if (pl_mp_array(body, "ended", false, PL_REG_MAX_HELD, &arr, errp) < 0)
        return -1;
    if (!arr || arr->via.array.size == 0)
        return 0;
    if (!(r->ended = calloc(arr->via.array.size, sizeof(*r->ended)))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        if (pl_event_decode(&arr->via.array.ptr[i], &r->ended[i], &e2) < 0) {
            int saved = errno;
            pl_errprintf(errp, "'ended' entry %u: %s", i, e2.text);
            errno = saved;
            return -1;
        }
        r->nended++;
    }
    return 0;
}

int pl_register_decode(const msgpack_object *body, struct pl_register *r,
                       struct pl_error *errp)
{
    bool once;

    memset(r, 0, sizeof(*r));
    if (pl_mp_str(body, "node", true, PL_NODE_NAME_MAX, &r->node, errp) < 0
        || pl_mp_uint(body, "pid", false, INT32_MAX, &r->pid, errp) < 0
        || pl_mp_uintv(body, "cores", true, PL_REG_MAX_CPUS,
                       PL_REG_MAX_CPU_ID, &r->cpu, &r->ncpu, errp) < 0
        || pl_mp_strv(body, "gpus", false, 0, PL_REG_MAX_GPUS, PL_GPU_ID_MAX,
                      &r->gpus, errp) < 0
        || pl_mp_uint(body, "last_run", false, UINT64_MAX, &r->last_run,
                      errp) < 0
        || pl_mp_uint(body, "job", false, UINT32_MAX, &r->job, errp) < 0
        || pl_mp_double(body, "job_end", false, &r->job_end, errp) < 0)
        goto error;
    /* pilotd plans its drain from it: a time it can compute with */
    if (!isfinite(r->job_end) || r->job_end < 0 || r->job_end > 1e11) {
        bad(errp, "bad 'job_end'");
        goto error;
    }
    if (!pl_node_name_ok(r->node)) {
        pl_errprintf(errp, "bad node name (want 1..%d of A-Z a-z 0-9 . _ -)",
                     PL_NODE_NAME_MAX);
        errno = EPROTO;
        goto error;
    }
    if (r->ncpu == 0) {
        bad(errp, "no cores");
        goto error;
    }
    /* pilotd would place two tasks on a core given twice */
    if (unique(r->cpu, r->ncpu, &once) < 0) {
        errno = ENOMEM;
        pl_errprintf(errp, "out of memory");
        goto error;
    }
    if (!once) {
        bad(errp, "a CPU id given twice");
        goto error;
    }
    for (size_t i = 0; r->gpus && r->gpus[i]; i++) {
        if (!pl_gpu_id_ok(r->gpus[i])) {
            bad(errp, "bad GPU id (want printable, no ',' or ';')");
            goto error;
        }
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(r->gpus[i], r->gpus[j])) {
                pl_errprintf(errp, "GPU id '%s' given twice", r->gpus[i]);
                errno = EPROTO;
                goto error;
            }
        }
    }
    if (running_decode(body, r, errp) < 0 || ended_decode(body, r, errp) < 0)
        goto error;
    return 0;
error:
    pl_register_clear(r);
    return -1;
}

/* ------------------------------------------------------------ welcome */

void pl_welcome_encode(struct pl_wbuf *w, uint64_t seq,
                       const struct pl_welcome *wl)
{
    pl_wbuf_init(w, PL_MSG_WELCOME, seq);
    pl_wm_str(&w->body, "node", wl->node);
    pl_wm_str(&w->body, "instance", wl->instance);
    pl_wm_double(&w->body, "heartbeat", wl->heartbeat);
}

void pl_welcome_clear(struct pl_welcome *wl)
{
    int saved = errno;

    free(wl->node);
    free(wl->instance);
    memset(wl, 0, sizeof(*wl));
    errno = saved;
}

int pl_welcome_decode(const msgpack_object *body, struct pl_welcome *wl,
                      struct pl_error *errp)
{
    memset(wl, 0, sizeof(*wl));
    if (pl_mp_str(body, "node", true, PL_NODE_NAME_MAX, &wl->node, errp) < 0
        || pl_mp_double(body, "heartbeat", true, &wl->heartbeat, errp) < 0
        || pl_mp_str(body, "instance", true, PL_INSTANCE_MAX, &wl->instance,
                     errp) < 0)
        goto error;
    if (!pl_node_name_ok(wl->node) || !isfinite(wl->heartbeat)
        || wl->heartbeat <= 0 || wl->heartbeat > PL_HEARTBEAT_MAX) {
        bad(errp, "welcome: bad node or heartbeat");
        goto error;
    }
    return 0;
error:
    pl_welcome_clear(wl);
    return -1;
}

/* ------------------------------------------------------------ the rest */

void pl_pull_encode(struct pl_wbuf *w, uint64_t seq, const struct pl_pull *p)
{
    pl_wbuf_init(w, PL_MSG_PULL, seq);
    pl_wm_uint(&w->body, "free_cores", p->free_cores);
    pl_wm_uint(&w->body, "free_gpus", p->free_gpus);
}

int pl_pull_decode(const msgpack_object *body, struct pl_pull *p,
                   struct pl_error *errp)
{
    memset(p, 0, sizeof(*p));
    if (pl_mp_uint(body, "free_cores", false, PL_REG_MAX_CPUS,
                   &p->free_cores, errp) < 0
        || pl_mp_uint(body, "free_gpus", false, PL_REG_MAX_GPUS,
                      &p->free_gpus, errp) < 0)
        return -1;
    return 0;
}

void pl_ack_encode(struct pl_wbuf *w, uint64_t acked)
{
    pl_wbuf_init(w, PL_MSG_ACK, 0);
    pl_wm_uint(&w->body, "seq", acked);
}

int pl_ack_decode(const msgpack_object *body, uint64_t *acked,
                  struct pl_error *errp)
{
    return pl_mp_uint(body, "seq", true, UINT64_MAX, acked, errp) < 0 ? -1
                                                                       : 0;
}

void pl_got_encode(struct pl_wbuf *w, uint64_t seq, uint64_t got)
{
    pl_wbuf_init(w, PL_MSG_GOT, seq);
    pl_wm_uint(&w->body, "got", got);
}

int pl_got_decode(const msgpack_object *body, uint64_t *got,
                  struct pl_error *errp)
{
    return pl_mp_uint(body, "got", true, UINT64_MAX, got, errp) < 0 ? -1 : 0;
}

void pl_kill_encode(struct pl_wbuf *w, uint64_t seq, const struct pl_kill *k)
{
    pl_wbuf_init(w, PL_MSG_KILL, seq);
    pl_wm_uint(&w->body, "id", k->id);
    pl_wm_uint(&w->body, "attempt", k->attempt);
    if (k->one)
        pl_wm_uint(&w->body, "rank", k->rank);
    pl_wm_double(&w->body, "grace", k->grace);
    if (k->queued_only)
        pl_wm_bool(&w->body, "queued_only", true);
}

int pl_kill_decode(const msgpack_object *body, struct pl_kill *k,
                   struct pl_error *errp)
{
    int one;

    memset(k, 0, sizeof(*k));
    if (pl_mp_uint(body, "id", true, UINT64_MAX, &k->id, errp) < 0
        || pl_mp_uint(body, "attempt", true, UINT32_MAX, &k->attempt, errp)
               < 0
        || (one = pl_mp_uint(body, "rank", false, UINT32_MAX, &k->rank,
                             errp)) < 0
        || pl_mp_double(body, "grace", true, &k->grace, errp) < 0
        || pl_mp_bool(body, "queued_only", false, &k->queued_only, errp) < 0)
        return -1;
    if (!isfinite(k->grace) || k->grace < 0 || k->grace > PL_KILL_GRACE_MAX)
        return bad(errp, "kill: grace out of range");
    k->one = one == 1;
    return 0;
}

void pl_pool_ready_encode(struct pl_wbuf *w, uint64_t seq,
                          const struct pl_pool_ready *p)
{
    pl_wbuf_init(w, PL_MSG_POOL_READY, seq);
    pl_wm_uint(&w->body, "job", p->job);
    pl_wm_uint(&w->body, "attempt", p->attempt);
    pl_wm_uintv(&w->body, "ranks", p->ranks, p->nranks);
}

int pl_pool_ready_decode(const msgpack_object *body, struct pl_pool_ready *p,
                         struct pl_error *errp)
{
    memset(p, 0, sizeof(*p));
    if (pl_mp_uint(body, "job", true, UINT64_MAX, &p->job, errp) < 0
        || pl_mp_uint(body, "attempt", true, UINT32_MAX, &p->attempt, errp)
               < 0
        || pl_mp_uintv(body, "ranks", true, PL_POOL_MAX_WORKERS,
                       PL_POOL_MAX_WORKERS - 1, &p->ranks, &p->nranks, errp)
               < 0) {
        pl_pool_ready_clear(p);
        return -1;
    }
    if (p->nranks == 0) {
        pl_pool_ready_clear(p);
        return bad(errp, "pool-ready: no ranks");
    }
    return 0;
}

void pl_pool_ready_clear(struct pl_pool_ready *p)
{
    int saved = errno;

    free(p->ranks);
    memset(p, 0, sizeof(*p));
    errno = saved;
}

void pl_bare_encode(struct pl_wbuf *w, int type, uint64_t seq)
{
    pl_wbuf_init(w, type, seq);
}
