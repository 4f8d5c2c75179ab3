/* agent/pyw.c - warm Python workers: the calls of fn pycall tasks
 * (agent/pyw.h)
 *
 * A worker lives from its spawn until it is reaped: its socket (our end
 * of the socketpair) closes before that when it goes idle for good, is
 * evicted, sends garbage or closes its end; the struct goes once it is
 * reaped (so that its call ends with its exit status) and its handles
 * are closed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "agent/agent_private.h"
#include "agent/env.h"
#include "agent/pyw.h"
#include "agent/spawn.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/pywmsg.h"
#include "proto/spec.h"
#include "proto/state.h"
#include "proto/strv.h"

#define IDLE_MS (10 * 60 * 1000) /* an idle worker goes after this */
#define KILL_AFTER_MS 2000       /* SIGINT, then SIGKILL this much later */
#define GONE_MS 5000             /* a worker told to go, then SIGKILL */
#define EOF_MS 500               /* its socket closed in a call: it must
                                    be dead this soon, or it is killed */

struct worker {
    struct pl_pyw *p;
    struct worker *next;
    uv_pipe_t pipe;            /* our end of its socketpair */
    uv_timer_t timer;          /* the call's timeout, then the SIGKILL;
                                  idle: its end */
    int closing;               /* handles whose close callback is due */
    bool open;                 /* 'pipe' not closed yet */
    bool going;                /* told to go (no more calls) */
    bool reaped;
    pid_t pid;
    bool hello;
    char version[PL_PYW_VERSION_MAX + 1];
    char *key;                 /* what calls it may run (make_key()) */
    size_t keylen;
    uint64_t last_used;        /* uv_now() at its last call's end */
    unsigned char *buf;        /* read, not yet a whole frame */
    size_t len, cap;
    unsigned calls;            /* calls it ran */
    /* the call */
    struct pl_run *run;        /* owned while busy; NULL when idle */
    bool entered;              /* it said ENTERED: a SIGINT reaches the
                                  function (before, it would be lost) */
    int stop;                  /* PL_ST_TIMEOUT, PL_ST_CANCELED: we
                                  interrupt it */
    uint64_t kill_ms;          /* after the SIGINT, SIGKILL this late */
    bool eof;                  /* its socket closed in a call */
    bool finished;             /* the last handle is closing: free it
                                  once 'closing' is 0 */
};

struct pl_pyw {
    struct pl_agent *a;
    struct worker *workers;
    char script[PATH_MAX];     /* _pyworker.py, "" if not found */
    char looked[512];          /* where it was looked for */
    unsigned spawned;
};

/* ------------------------------------------------------------ helpers */

static size_t nactive(const struct pl_pyw *p)
{
    size_t n = 0;

    for (const struct worker *w = p->workers; w; w = w->next)
        n += !w->going;
    return n;
}

static void sig_group(struct worker *w, int sig)
{
    if (w->pid > 0 && !w->reaped && kill(-w->pid, sig) < 0 && errno == ESRCH)
        (void)kill(w->pid, sig);
}

/* The key of entry 'r': interpreter, prelude, environment (less the
 * variables of an array element, which differ by element), cores, GPUs,
 * NUL-separated.  NULL when out of memory. */
static char *make_key(const struct pl_run *r, size_t *len)
{
    const char *py = r->python ? r->python : PL_PY_DEFAULT_PYTHON;
    const char *pre = r->py_prelude ? r->py_prelude : "";
    size_t n = strlen(py) + strlen(pre) + 2 + 1;
    char *k, *q;

    for (char **e = r->env; e && *e; e++)
        n += strlen(*e) + 1;
    n += (size_t)(r->ncores + r->ngpus) * 24 + 2;
    if (!(k = q = malloc(n)))
        return NULL;
    q += sprintf(q, "%s%c%s%c", py, 0, pre, 0);
    for (char **e = r->env; e && *e; e++)
        if (strncmp(*e, "PILOT_ARRAY_", 12))
            q += sprintf(q, "%s%c", *e, 0);
    *q++ = '\1'; /* the end of the environment */
    for (uint32_t i = 0; i < r->ncores; i++)
        q += sprintf(q, "c%llu,", (unsigned long long)r->cores[i]);
    for (uint32_t i = 0; i < r->ngpus; i++)
        q += sprintf(q, "g%llu,", (unsigned long long)r->gpus[i]);
    *len = (size_t)(q - k);
    return k;
}

/* ------------------------------------------------------------ ends */

/* The call of 'w' ends in 'st' ('why' copied, may be NULL): its event,
 * its cores and GPUs back.  The result's fields, if any, are set by the
 * caller in the event returned (NULL: lost, out of memory). */
static struct pl_event *call_end(struct worker *w, int st, int code,
                                 int sig, const char *why)
{
    struct pl_agent *a = w->p->a;
    struct pl_run *r = w->run;
    struct pl_event *e;

    if (!r)
        return NULL;
    w->run = NULL;
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
    if (why && !(e->error = strdup(why)))
        pl_log(LOG_WARNING, "a call's reason: out of memory");
    return e;
}

static void free_cb(uv_handle_t *h)
{
    struct worker *w = h->data;

    if (--w->closing == 0 && w->finished) {
        free(w->buf);
        free(w->key);
        free(w);
    }
}

static void unlink_worker(struct worker *w)
{
    for (struct worker **q = &w->p->workers; *q; q = &(*q)->next)
        if (*q == w) {
            *q = w->next;
            return;
        }
}

/* Close our end of the worker's socket: it sees EOF and exits. */
static void close_pipe(struct worker *w)
{
    if (!w->open)
        return;
    w->open = false;
    uv_read_stop((uv_stream_t *)&w->pipe);
    w->closing++;
    uv_close((uv_handle_t *)&w->pipe, free_cb);
}

static void gone_cb(uv_timer_t *h)
{
    sig_group(h->data, SIGKILL);
}

/* No more calls for 'w': its socket closes, and SIGKILL follows if it
 * has not exited GONE_MS later. */
static void worker_go(struct worker *w, const char *why)
{
    if (w->going)
        return;
    w->going = true;
    pl_log(LOG_INFO, "Python worker %d: goes (%s) after %u calls",
           (int)w->pid, why, w->calls);
    close_pipe(w);
    if (!w->reaped)
        uv_timer_start(&w->timer, gone_cb, GONE_MS, 0);
}

/* The worker was reaped with wait status 'status': its call, if any,
 * ends with it, and it is freed. */
static void worker_dead(struct worker *w, int status)
{
    struct pl_pyw *p = w->p;
    char why[512];
    int code = -1, sig = 0;

    w->reaped = true;
    if (WIFSIGNALED(status))
        sig = WTERMSIG(status);
    else
        code = WEXITSTATUS(status);
    int st = w->stop ? w->stop : PL_ST_FAILED;
    if (!w->run) {
        if (!w->going)
            pl_log(LOG_INFO, "Python worker %d exited (%s %d) while idle",
                   (int)w->pid, sig ? "signal" : "code", sig ? sig : code);
    }
    else if (w->stop == PL_ST_TIMEOUT)
        snprintf(why, sizeof(why), "timeout after %.3g s: its Python worker "
                 "(pid %d on %s) was killed", w->run->timeout, (int)w->pid,
                 p->a->node);
    else if (w->stop)
        snprintf(why, sizeof(why), "canceled: its Python worker (pid %d on "
                 "%s) was killed", (int)w->pid, p->a->node);
    else if (!w->hello)
        /* its interpreter could not run the worker at all: what it said
         * went to our log */
        snprintf(why, sizeof(why), "its Python worker (pid %d on %s, %s) "
                 "%s %d before it said hello (its output is in the agent's "
                 "log)", (int)w->pid, p->a->node,
                 w->run->python ? w->run->python : PL_PY_DEFAULT_PYTHON,
                 sig ? "died of signal" : "exited with code",
                 sig ? sig : code);
    else if (sig)
        snprintf(why, sizeof(why), "its Python worker (pid %d on %s) died of "
                 "signal %d (%s) during the call", (int)w->pid, p->a->node,
                 sig, strsignal(sig));
    else
        snprintf(why, sizeof(why), "its Python worker (pid %d on %s) exited "
                 "with code %d during the call", (int)w->pid, p->a->node,
                 code);
    if (w->run)
        call_end(w, st, sig ? 128 + sig : code, sig, why);
    unlink_worker(w);
    w->finished = true;
    close_pipe(w);
    w->closing++;
    uv_close((uv_handle_t *)&w->timer, free_cb);
}

/* The worker broke the protocol (garbage on its socket, a frame too
 * large, its socket closed in a call): it goes at once (SIGKILL); its
 * call fails once it is reaped, saying 'why'. */
static void worker_bad(struct worker *w, const char *why)
{
    pl_log(LOG_WARNING, "Python worker %d: %s: killed", (int)w->pid, why);
    if (w->run && !w->stop) {
        /* the reason the reap gives would hide this one */
        char text[512];
        snprintf(text, sizeof(text), "its Python worker (pid %d on %s): %s",
                 (int)w->pid, w->p->a->node, why);
        call_end(w, PL_ST_FAILED, 1, 0, text);
    }
    w->going = true;
    close_pipe(w);
    sig_group(w, SIGKILL);
}

static void eof_cb(uv_timer_t *h)
{
    worker_bad(h->data, "its socket closed in a call, and it lives on");
}

static void idle_cb(uv_timer_t *h)
{
    worker_go(h->data, "idle for 10 minutes");
}

static void kill_cb(uv_timer_t *h)
{
    struct worker *w = h->data;

    pl_log(LOG_INFO, "Python worker %d: no answer %.3g s after SIGINT: "
           "SIGKILL", (int)w->pid, (double)w->kill_ms / 1000.0);
    sig_group(w, SIGKILL);
}

/* Interrupt the call of 'w' because of 'st' (timeout, canceled): SIGINT
 * now (or when it says ENTERED: before, the worker is not in the
 * function and drops it), SIGKILL 'ms' later (0: at once). */
static void interrupt(struct worker *w, int st, uint64_t ms)
{
    if (!w->run)
        return;
    if (!w->stop) {
        w->stop = st;
        w->kill_ms = ms;
        if (ms) {
            if (w->entered)
                sig_group(w, SIGINT);
            uv_timer_start(&w->timer, kill_cb, ms, 0);
            return;
        }
    }
    if (ms == 0) {
        w->kill_ms = 0;
        sig_group(w, SIGKILL);
    }
}

static void timeout_cb(uv_timer_t *h)
{
    struct worker *w = h->data;

    pl_log(LOG_INFO, "task %llu: timeout after %.3g s: SIGINT to its Python "
           "worker %d", (unsigned long long)w->run->id, w->run->timeout,
           (int)w->pid);
    interrupt(w, PL_ST_TIMEOUT, KILL_AFTER_MS);
}

/* ------------------------------------------------------------ results */

/* RESULT 'res' of the call of 'w'. */
static void on_result(struct worker *w, struct pl_pyresult *res)
{
    struct pl_run *r = w->run;
    struct pl_event *e;
    char why[PL_PYW_REASON_MAX + 160];

    if (res->file && strcmp(res->file, r->result_file)) {
        worker_bad(w, "it named a result file that is not its call's");
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
        call_end(w, w->stop, -1, -1, why);
        return;
    }
    if (res->status == PL_PYW_ERROR) {
        call_end(w, PL_ST_FAILED, 1, 0, res->reason);
        return;
    }
    e = call_end(w, res->status == PL_PYW_OK ? PL_ST_DONE : PL_ST_FAILED,
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
static void on_frame(struct worker *w, const unsigned char *buf, size_t len)
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
            sig_group(w, SIGINT); /* it was stopped on its way in */
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
        uv_timer_start(&w->timer, idle_cb, IDLE_MS, 0);
    return;
bad_msg:
    pl_pyw_msg_clear(&m);
bad:
    snprintf(why, sizeof(why), "a bad message (%s)", err.text);
    worker_bad(w, why);
}

static void alloc_cb(uv_handle_t *h, size_t want, uv_buf_t *b)
{
    struct worker *w = h->data;
    (void)want;

    if (w->cap - w->len < 4096) {
        size_t ncap = w->cap ? w->cap * 2 : 16384;
        unsigned char *nb = ncap <= PL_PYW_FRAME_MAX + 16384
                                ? realloc(w->buf, ncap)
                                : NULL;
        if (!nb) {
            *b = uv_buf_init(NULL, 0); /* UV_ENOBUFS: a bad frame */
            return;
        }
        w->buf = nb;
        w->cap = ncap;
    }
    *b = uv_buf_init((char *)w->buf + w->len, (unsigned)(w->cap - w->len));
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct worker *w = s->data;
    size_t off = 0;
    (void)b;

    if (n < 0) {
        /* its end closed: it is exiting (its reap ends the call, with
         * its exit status), or a function closed fd 3 */
        close_pipe(w);
        if (n != UV_EOF)
            worker_bad(w, uv_strerror((int)n));
        else if (w->run && !w->stop) {
            w->eof = true;
            uv_timer_start(&w->timer, eof_cb, EOF_MS, 0);
        }
        return;
    }
    w->len += (size_t)n;
    while (w->open && w->len - off >= 4) {
        size_t flen = pl_pyw_frame_len(w->buf + off);
        if (flen > PL_PYW_FRAME_MAX) {
            worker_bad(w, "a frame larger than a worker may send");
            return;
        }
        if (w->len - off - 4 < flen)
            break;
        on_frame(w, w->buf + off + 4, flen);
        off += 4 + flen;
    }
    if (!w->open)
        return;
    memmove(w->buf, w->buf + off, w->len - off);
    w->len -= off;
}

/* ------------------------------------------------------------ calls */

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

/* A new worker for entry 'r' (its key 'key', taken), bound to its cores
 * and GPUs, with environment 'env'.  NULL with errp set. */
static struct worker *spawn_worker(struct pl_pyw *p, const struct pl_run *r,
                                   struct pl_env *env, char *key,
                                   size_t keylen, struct pl_error *errp)
{
    struct pl_agent *a = p->a;
    const char *py = r->python ? r->python : PL_PY_DEFAULT_PYTHON;
    char prog[PATH_MAX + 256];
    char *argv[] = { (char *)py, p->script, (char *)"--fd", (char *)"3",
                     NULL };
    int sv[2] = { -1, -1 }, rc;
    struct pl_env *wenv = NULL;
    struct worker *w = NULL;
    pid_t pid;

    if (!p->script[0]) {
        free(key);
        return pl_errprintf(errp, "the Python worker's script is not "
                            "installed (looked for %s)", p->looked),
               NULL;
    }
    if ((rc = pl_spawn_find(py, pl_env_vector(env), prog, sizeof(prog)))) {
        free(key);
        errno = rc;
        pl_errprintf(errp, "python '%s' %s", py,
                     rc == ENOENT ? "not found in PATH" : strerror(rc));
        return NULL;
    }
    if (!(w = calloc(1, sizeof(*w))))
        goto nomem;
    /* its own key while it lives (the calls' are theirs): a later agent
     * kills it if this one dies (agent/leftover.h) */
    if (!(wenv = pl_env_new(pl_env_vector(env)))
        || pl_env_setf(wenv, "PILOT_TASK_KEY", "%s/pyw.%u", a->owner,
                       p->spawned + 1) < 0)
        goto nomem;
    w->p = p;
    w->key = key;
    w->keylen = keylen;
    key = NULL;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        pl_errprintf(errp, "socketpair: %s", strerror(errno));
        goto error;
    }
    if (pl_bind_cpu_enter(a->cpu, r, errp) < 0)
        goto error;
    if (pl_bind_cuda_enter(a->cuda, r, errp) < 0) {
        pl_bind_cpu_leave(a->cpu);
        goto error;
    }
    /* its own output between calls: the agent's log */
    rc = pl_spawn(prog, argv, pl_env_vector(wenv), a->devnull, 2, 2, sv[1],
                  NULL, &pid);
    pl_env_free(wenv);
    wenv = NULL;
    pl_bind_cuda_leave(a->cuda);
    pl_bind_cpu_leave(a->cpu);
    close(sv[1]);
    sv[1] = -1;
    if (rc) {
        errno = rc;
        pl_errprintf(errp, "spawn %s: %s", py, strerror(rc));
        goto error;
    }
    w->pid = pid;
    uv_pipe_init(&a->loop, &w->pipe, 0);
    uv_timer_init(&a->loop, &w->timer);
    w->pipe.data = w->timer.data = w;
    w->closing = 0;
    w->open = true;
    w->next = p->workers;
    p->workers = w;
    p->spawned++;
    if ((rc = uv_pipe_open(&w->pipe, sv[0])) < 0
        || (rc = uv_read_start((uv_stream_t *)&w->pipe, alloc_cb, read_cb))
               < 0) {
        /* it is ours now: reaped as any (its call never started) */
        pl_errprintf(errp, "its socket: %s", uv_strerror(rc));
        worker_bad(w, "its socket could not be watched");
        return NULL;
    }
    pl_log(LOG_INFO, "Python worker %d started: %s %s on cores of task %llu",
           (int)pid, prog, p->script, (unsigned long long)r->id);
    return w;
nomem:
    pl_errprintf(errp, "out of memory");
error:
    pl_env_free(wenv);
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    free(key);
    if (w)
        free(w->key);
    free(w);
    return NULL;
}

/* An idle worker of 'key', or NULL; the least recently used idle one
 * of any key in *lru (NULL: none). */
static struct worker *find_idle(struct pl_pyw *p, const char *key,
                                size_t keylen, struct worker **lru)
{
    struct worker *found = NULL;

    *lru = NULL;
    for (struct worker *w = p->workers; w; w = w->next) {
        if (w->going || w->run || !w->open)
            continue;
        if (!found && w->keylen == keylen && !memcmp(w->key, key, keylen))
            found = w;
        if (!*lru || w->last_used < (*lru)->last_used)
            *lru = w;
    }
    return found;
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
        .result_max = PL_PY_RESULT_MAX,
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
    if (!(key = make_key(r, &keylen)) || !(own = malloc(sizeof(*own)))
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
    if (!(w = find_idle(p, key, keylen, &lru))) {
        uint32_t ncores;
        (void)pl_resources_cores(a->res, &ncores);
        if (lru && nactive(p) >= ncores)
            worker_go(lru, "room for another");
        if (!(w = spawn_worker(p, r, env, key, keylen, &err))) {
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
    own = NULL;
    if (send_call(p, w, w->run, env, &err) < 0) {
        call_end(w, PL_ST_FAILED, -1, 0, err.text);
        worker_bad(w, "it could not be sent a call");
        goto done;
    }
    struct pl_event *e = pl_agent_event_add(a, w->run->id, w->run->attempt,
                                            w->run->rank, PL_ST_RUNNING);
    if (e)
        e->pid = w->pid;
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
        interrupt(w, PL_ST_CANCELED, ms);
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
                out[n] = (struct pl_held){ w->run->id, w->run->attempt,
                                           w->run->rank };
            n++;
        }
    return n;
}

size_t pl_pyw_busy(const struct pl_pyw *p)
{
    return pl_pyw_held(p, NULL, 0);
}

size_t pl_pyw_workers(const struct pl_pyw *p, pid_t *pids, size_t max)
{
    size_t n = 0;

    for (const struct worker *w = p ? p->workers : NULL; w; w = w->next) {
        if (pids && n < max)
            pids[n] = w->pid;
        n++;
    }
    return n;
}

void pl_pyw_shutdown(struct pl_pyw *p)
{
    for (struct worker *w = p ? p->workers : NULL; w; w = w->next) {
        if (w->run)
            interrupt(w, PL_ST_CANCELED, 0);
        else
            worker_go(w, "the agent stops");
    }
}

bool pl_pyw_child(const struct pl_pyw *p, pid_t pid)
{
    for (const struct worker *w = p ? p->workers : NULL; w; w = w->next)
        if (w->pid == pid && !w->reaped)
            return true;
    return false;
}

void pl_pyw_reap(struct pl_pyw *p)
{
    struct worker *w = p ? p->workers : NULL, *next;

    for (; w; w = next) {
        siginfo_t info;
        next = w->next; /* worker_dead() unlinks it */
        memset(&info, 0, sizeof(info));
        if (w->reaped
            || waitid(P_PID, (id_t)w->pid, &info, WEXITED | WNOHANG) != 0
            || info.si_pid != w->pid)
            continue;
        worker_dead(w, info.si_code == CLD_EXITED ? info.si_status << 8
                                                  : info.si_status & 0x7f);
    }
}

/* Where _pyworker.py is: $PILOT_PYWORKER, else beside our program. */
static void find_script(struct pl_pyw *p)
{
    static const char *const rel[] = { "../python/pilot/_pyworker.py",
                                       "../share/pilot/python/pilot/"
                                       "_pyworker.py" };
    char exe[PATH_MAX], path[PATH_MAX + 64];
    const char *env = getenv("PILOT_PYWORKER");
    ssize_t n;

    if (env && *env) {
        snprintf(p->looked, sizeof(p->looked), "%s ($PILOT_PYWORKER)", env);
        if (access(env, R_OK) == 0)
            snprintf(p->script, sizeof(p->script), "%s", env);
        return;
    }
    if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) <= 0)
        return;
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", exe, rel[i]);
        snprintf(p->looked + strlen(p->looked),
                 sizeof(p->looked) - strlen(p->looked), "%s%s", i ? ", " : "",
                 path);
        if (access(path, R_OK) == 0 && realpath(path, p->script))
            return;
    }
    p->script[0] = '\0';
}

struct pl_pyw *pl_pyw_new(struct pl_agent *a)
{
    struct pl_pyw *p = calloc(1, sizeof(*p));

    if (!p)
        return NULL;
    p->a = a;
    find_script(p);
    if (!p->script[0])
        pl_log(LOG_WARNING, "Python calls cannot run here: no worker script "
               "(looked for %s)", p->looked);
    return p;
}

void pl_pyw_close(struct pl_pyw *p)
{
    if (!p)
        return;
    while (p->workers) {
        struct worker *w = p->workers;
        sig_group(w, SIGKILL);
        if (w->run) {
            pl_resources_release(p->a->res, w->run->cores, w->run->ncores,
                                 w->run->gpus, w->run->ngpus);
            pl_run_clear(w->run);
            free(w->run);
            w->run = NULL;
        }
        p->workers = w->next;
        w->finished = true;
        close_pipe(w);
        w->closing++;
        uv_close((uv_handle_t *)&w->timer, free_cb);
    }
    free(p);
}
