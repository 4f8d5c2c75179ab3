/* agent/pyw_call.c - a Python call in a warm worker: sent, its frames
 * read, its result or its interruption turned into the rank's events
 * (agent/pyw.h) */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "agent/pyw_private.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/spec.h"
#include "proto/state.h"

/* ------------------------------------------------------------ ends */

/* The call of 'w' ends in 'st' ('why' copied, may be NULL): its event,
 * its cores and GPUs back.  The result's fields, if any, are set by the
 * caller in the event returned (NULL: lost, out of memory). */
struct pl_event *pyw_call_end(struct worker *w, int st, int code,
                                 int sig, const char *why)
{
    struct pl_agent *a = w->p->a;
    struct pl_run *r = w->run;
    struct pl_event *e;

    if (!r)
        return NULL;
    w->run = NULL;
    /* the worker's CPU over the call; none once it is reaped */
    struct pl_usage use = { 0 };
    if (!w->reaped)
        pl_cpu_since(w->pid, &w->cpu0, &use);
    pl_gpusample_take(a->gsample, r->id, r->attempt, r->rank, &use);
    uv_timer_stop(&w->timer);
    pl_resources_release(a->res, r->cores, r->ncores, r->gpus, r->ngpus);
    pl_log(LOG_INFO, "task %llu: %s in Python worker %d%s%s",
           (unsigned long long)r->id, pl_state_name(st), (int)w->pid,
           why ? ": " : "", why ? why : "");
    e = pl_agent_event_add(a, r->id, r->attempt, r->rank, st);
    pl_run_clear(r);
    free(r);
    w->stop = 0;
    w->last_used = uv_now(&a->loop);
    w->calls++;
    if (!e)
        return NULL;
    e->exit_code = code;
    e->signal = sig;
    e->use = use;
    if (why && !(e->error = strdup(why)))
        pl_log(LOG_WARNING, "a call's reason: out of memory");
    return e;
}

static void kill_cb(uv_timer_t *h)
{
    struct worker *w = h->data;

    pl_log(LOG_INFO, "Python worker %d: no answer %.3g s after SIGINT: "
           "SIGKILL", (int)w->pid, (double)w->kill_ms / 1000.0);
    pyw_sig(w, SIGKILL);
}

/* Interrupt the call of 'w' because of 'st' (timeout, canceled): SIGINT
 * now (or when it says ENTERED: before, the worker is not in the
 * function and drops it), SIGKILL 'ms' later (0: at once). */
void pyw_interrupt(struct worker *w, int st, uint64_t ms)
{
    if (!w->run)
        return;
    if (!w->stop) {
        w->stop = st;
        w->kill_ms = ms;
        if (ms) {
            if (w->entered)
                pyw_sig(w, SIGINT);
            uv_timer_start(&w->timer, kill_cb, ms, 0);
            return;
        }
    }
    if (ms == 0) {
        w->kill_ms = 0;
        pyw_sig(w, SIGKILL);
    }
}

static void timeout_cb(uv_timer_t *h)
{
    struct worker *w = h->data;

    pl_log(LOG_INFO, "task %llu: timeout after %.3g s: SIGINT to its Python "
           "worker %d", (unsigned long long)w->run->id, w->run->timeout,
           (int)w->pid);
    pyw_interrupt(w, PL_ST_TIMEOUT, KILL_AFTER_MS);
}

/* ------------------------------------------------------------ its word */

/* RESULT 'res' of the call of 'w'. */
static void on_result(struct worker *w, struct pl_pyresult *res)
{
    struct pl_run *r = w->run;
    struct pl_event *e;
    char why[PL_PYW_REASON_MAX + 160];

    if (res->file && strcmp(res->file, r->result_file)) {
        pyw_bad(w, "it named a result file that is not its call's");
        return;
    }
    if (w->stop) {
        snprintf(why, sizeof(why), "%s: interrupted (%s) in its Python "
                 "worker (pid %d), which stays", w->stop == PL_ST_TIMEOUT
                     ? "timeout" : "canceled",
                 res->reason ? res->reason : "no reason given", (int)w->pid);
        if (w->stop == PL_ST_TIMEOUT)
            snprintf(why, sizeof(why), "timeout after %.3g s: interrupted "
                     "(%s); its Python worker (pid %d) stays", r->timeout,
                     res->reason ? res->reason : "it returned",
                     (int)w->pid);
        pyw_call_end(w, w->stop, -1, -1, why);
        return;
    }
    if (res->status == PL_PYW_ERROR) {
        pyw_call_end(w, PL_ST_FAILED, 1, 0, res->reason);
        return;
    }
    e = pyw_call_end(w, res->status == PL_PYW_OK ? PL_ST_DONE : PL_ST_FAILED,
                 res->status == PL_PYW_OK ? 0 : 1, 0,
                 res->status == PL_PYW_OK ? NULL : res->reason);
    if (!e)
        return;
    e->result_status = res->status == PL_PYW_OK ? PL_PYR_OK : PL_PYR_RAISED;
    e->result_size = (int64_t)res->size;
    if (res->data && !(e->result = malloc(res->size ? res->size : 1)))
        goto nomem;
    if (res->data) {
        memcpy(e->result, res->data, res->size);
        e->nresult = res->size;
    }
    e->result_file = res->file; /* taken */
    res->file = NULL;
    e->result_repr = res->repr;
    res->repr = NULL;
    return;
nomem:
    /* the task ends as it did, its value lost: say so */
    e->result_status = PL_PYR_NONE;
    pl_log(LOG_WARNING, "a call's result: out of memory");
}

/* One frame from 'w' ('len' bytes at 'buf', after its length). */
void pyw_on_frame(struct worker *w, const unsigned char *buf, size_t len)
{
    struct pl_pyw_msg m;
    struct pl_pyhello hello;
    struct pl_pyresult res;
    struct pl_error err;
    char why[sizeof(err.text) + 40];

    if (pl_pyw_decode(buf, len, &m, &err) < 0)
        goto bad;
    if (!w->hello) {
        if (pl_pyhello_decode(&m, &hello, &err) < 0)
            goto bad_msg;
        w->hello = true;
        memcpy(w->version, hello.version, sizeof(w->version));
        pl_log(LOG_INFO, "Python worker %d: hello (Python %s)", (int)w->pid,
               w->version);
        pl_pyw_msg_clear(&m);
        return;
    }
    if (!w->run) {
        snprintf(err.text, sizeof(err.text), "a message while idle");
        goto bad_msg;
    }
    if (m.kind == PL_MSG_PY_ENTERED) {
        uint64_t id, attempt;
        if (pl_pyentered_decode(&m, &id, &attempt, &err) < 0)
            goto bad_msg;
        if (id != w->run->id || attempt != w->run->attempt || w->entered) {
            snprintf(err.text, sizeof(err.text), "entered another call");
            goto bad_msg;
        }
        w->entered = true;
        if (w->stop && w->kill_ms)
            pyw_sig(w, SIGINT); /* it was stopped on its way in */
        pl_pyw_msg_clear(&m);
        return;
    }
    if (pl_pyresult_decode(&m, PL_PY_RESULT_INLINE, PL_PY_RESULT_MAX, &res,
                           &err) < 0)
        goto bad_msg;
    if (res.id != w->run->id || res.attempt != w->run->attempt) {
        pl_pyresult_clear(&res);
        snprintf(err.text, sizeof(err.text), "a result of another call");
        goto bad_msg;
    }
    on_result(w, &res);
    pl_pyresult_clear(&res);
    pl_pyw_msg_clear(&m);
    if (!w->going && !w->run)
        pyw_idle(w);
    return;
bad_msg:
    pl_pyw_msg_clear(&m);
bad:
    snprintf(why, sizeof(why), "a bad message (%s)", err.text);
    pyw_bad(w, why);
}

/* ------------------------------------------------------------ a call */

struct wreq {
    uv_write_t req;
    unsigned char *buf;
};

static void write_cb(uv_write_t *req, int status)
{
    struct wreq *q = req->data;

    if (status < 0 && status != UV_ECANCELED)
        pl_log(LOG_INFO, "write to a Python worker: %s", uv_strerror(status));
    free(q->buf);
    free(q);
}

/* A call that never reached a worker fails with 'why' (exit 'code', -1:
 * none); its cores and GPUs go back. */
static void refuse(struct pl_pyw *p, struct pl_run *r, int code,
                   const char *why)
{
    struct pl_agent *a = p->a;
    struct pl_event *e;

    pl_log(LOG_WARNING, "task %llu: %s", (unsigned long long)r->id, why);
    pl_resources_release(a->res, r->cores, r->ncores, r->gpus, r->ngpus);
    if ((e = pl_agent_event_add(a, r->id, r->attempt, r->rank,
                                PL_ST_FAILED))) {
        e->exit_code = code;
        e->error = strdup(why);
    }
}

/* Send the call of 'r' (moved into 'w') to 'w'. */
static int send_call(struct pl_pyw *p, struct worker *w, struct pl_run *r,
                     struct pl_env *env, struct pl_error *errp)
{
    struct pl_pycall c = {
        .id = r->id, .attempt = r->attempt, .argv = r->argv,
        .pickled = r->input || r->input_file, .input = r->input,
        .ninput = r->ninput, .input_file = r->input_file,
        .env = pl_env_vector(env), .cwd = r->cwd, .out = r->out,
        .err = r->err, .result_file = r->result_file,
        .prelude = r->py_prelude, .inline_max = PL_PY_RESULT_INLINE,
        .result_max = PL_PY_RESULT_MAX, .refs = r->refs, .nrefs = r->nrefs,
    };
    struct wreq *q = calloc(1, sizeof(*q));
    unsigned dropped = 0;
    size_t len;
    int rc;

    if (!q)
        return pl_errprintf(errp, "out of memory");
    if (pl_pycall_encode(&c, &q->buf, &len, &dropped, errp) < 0) {
        free(q);
        return -1;
    }
    /* the refs' results (up to 4 MiB) are in the frame now: not held
     * through the call */
    for (uint32_t i = 0; i < r->nrefs; i++) {
        free(r->refs[i].data);
        free(r->refs[i].file);
    }
    free(r->refs);
    r->refs = NULL;
    r->nrefs = 0;
    if (dropped)
        pl_log(LOG_INFO, "task %llu: %u environment entries that are not "
               "UTF-8 left out of its Python call", (unsigned long long)r->id,
               dropped);
    q->req.data = q;
    uv_buf_t b = uv_buf_init((char *)q->buf, (unsigned)len);
    if ((rc = uv_write(&q->req, (uv_stream_t *)&w->pipe, &b, 1, write_cb))
        < 0) {
        free(q->buf);
        free(q);
        return pl_errprintf(errp, "write to its Python worker: %s",
                            uv_strerror(rc));
    }
    (void)p;
    return 0;
}

void pl_pyw_call(struct pl_pyw *p, struct pl_run *r)
{
    struct pl_agent *a = p->a;
    struct pl_error err;
    struct pl_env *env = NULL;
    struct worker *w, *lru;
    struct pl_run *own = NULL;
    size_t keylen;
    char *key;
    int fd;

    /* the task's output files, made and checked as a task's are: the
     * worker opens them for each call */
    if ((fd = pl_output_open(r->out, false, &err)) < 0
        || (close(fd), strcmp(r->err, r->out)
                           && (fd = pl_output_open(r->err, false, &err)) < 0)) {
        refuse(p, r, -1, err.text);
        return;
    }
    if (strcmp(r->err, r->out))
        close(fd);
    snprintf(err.text, sizeof(err.text), "out of memory");
    if (!(key = pyw_key(r, &keylen)) || !(own = malloc(sizeof(*own)))
        || !(env = pl_agent_task_env(a, r, &err))
        /* the function's processes are found by the task's key */
        || pl_env_setf(env, "PILOT_TASK_KEY", "%s/%llu.%llu.%llu", a->owner,
                       (unsigned long long)r->id,
                       (unsigned long long)r->attempt,
                       (unsigned long long)r->rank) < 0) {
        free(key);
        refuse(p, r, -1, err.text);
        goto done;
    }
    if (!(w = pyw_find_idle(p, key, keylen, &lru))) {
        uint32_t ncores;
        (void)pl_resources_cores(a->res, &ncores);
        if (lru && pyw_nactive(p) >= ncores)
            pyw_go(lru, "room for another");
        if (!(w = pyw_spawn(p, r, env, key, keylen, &err))) {
            refuse(p, r, 127, err.text);
            goto done;
        }
    }
    else
        free(key);
    uv_timer_stop(&w->timer);
    *own = *r;
    memset(r, 0, sizeof(*r));
    w->run = own;
    w->entered = false;
    pl_cpu_mark(w->pid, &w->cpu0);
    own = NULL;
    if (send_call(p, w, w->run, env, &err) < 0) {
        pyw_call_end(w, PL_ST_FAILED, -1, 0, err.text);
        pyw_bad(w, "it could not be sent a call");
        goto done;
    }
    struct pl_event *e = pl_agent_event_add(a, w->run->id, w->run->attempt,
                                            w->run->rank, PL_ST_RUNNING);
    if (e)
        e->pid = w->pid;
    pl_gpusample_watch(a->gsample, w->run->id, w->run->attempt, w->run->rank,
                       w->run->gpus, w->run->ngpus);
    if (w->run->timeout > 0)
        uv_timer_start(&w->timer, timeout_cb,
                       (uint64_t)(w->run->timeout * 1000.0 + 0.5), 0);
    pl_log(LOG_INFO, "task %llu: called in Python worker %d (call %u)",
           (unsigned long long)w->run->id, (int)w->pid, w->calls + 1);
done:
    free(own);
    pl_env_free(env);
}

/* ------------------------------------------------------------ the rest */

bool pl_pyw_runs(const struct pl_pyw *p, uint64_t id, uint64_t attempt,
                 uint64_t rank)
{
    for (const struct worker *w = p ? p->workers : NULL; w; w = w->next)
        if (w->run && w->run->id == id && w->run->attempt == attempt
            && w->run->rank == rank)
            return true;
    return false;
}

size_t pl_pyw_kill(struct pl_pyw *p, const struct pl_kill *k)
{
    size_t n = 0;

    for (struct worker *w = p ? p->workers : NULL; w; w = w->next) {
        if (!w->run || w->run->id != k->id || w->run->attempt != k->attempt
            || (k->one && w->run->rank != k->rank))
            continue;
        uint64_t ms = k->grace * 1000.0 < KILL_AFTER_MS
                          ? (uint64_t)(k->grace * 1000.0)
                          : KILL_AFTER_MS;
        pl_log(LOG_INFO, "task %llu: kill: SIGINT to its Python worker %d",
               (unsigned long long)k->id, (int)w->pid);
        pyw_interrupt(w, PL_ST_CANCELED, ms);
        n++;
    }
    return n;
}

size_t pl_pyw_held(const struct pl_pyw *p, struct pl_held *out, size_t max)
{
    size_t n = 0;

    for (const struct worker *w = p ? p->workers : NULL; w; w = w->next)
        if (w->run) {
            if (n < max)
                out[n] = (struct pl_held){ .id = w->run->id,
                                           .attempt = w->run->attempt,
                                           .rank = w->run->rank };
            n++;
        }
    return n;
}

size_t pl_pyw_busy(const struct pl_pyw *p)
{
    return pl_pyw_held(p, NULL, 0);
}
