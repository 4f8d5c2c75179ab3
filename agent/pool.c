/* agent/pool.c - the pool workers of this node: their socket, the calls
 * the agent gives them, and what becomes of those calls (agent/pool.h)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "agent/agent_private.h"
#include "agent/pool.h"
#include "agent/usage.h"
#include "proto/log.h"
#include "proto/pilotdir.h"
#include "proto/poolmsg.h"
#include "proto/state.h"
#include "proto/strv.h"

/* A worker's messages are small (its error texts at most 4 KiB): a frame
 * announcing more is not one of ours. */
#define FRAME_MAX (64 * 1024)

struct worker {
    struct pl_wpool *p;
    struct worker *next;
    uv_pipe_t pipe;
    uv_timer_t timer;          /* the call's timeout */
    int closing;               /* handles still to close */
    unsigned char *buf;        /* what was read, not yet a whole frame */
    size_t len, cap;
    /* HELLO */
    bool hello;
    bool reported;             /* in a POOL_READY to this pilotd */
    char pool[PL_POOL_NAME_MAX + 1];
    uint64_t job, attempt, wr;
    pid_t pid;
    /* the call */
    bool busy;
    uint64_t id, tattempt, rank;
    bool entered;
    int64_t crash;             /* its signal (CRASH), -1 none */
    int killed;                /* we killed it: PL_ST_CANCELED, _TIMEOUT */
    struct pl_cpu_mark cpu0;   /* its CPU time when the call was sent */
    double timeout;
};

struct pl_wpool {
    struct pl_agent *a;
    uv_pipe_t listener;
    bool listening;
    struct worker *workers;
    size_t nworkers;
};

/* ------------------------------------------------------------ sending */

struct wreq {
    uv_write_t req;
    unsigned char hdr[4];
    struct pl_wbuf w;
};

static void write_cb(uv_write_t *req, int status)
{
    struct wreq *r = req->data;

    if (status < 0 && status != UV_ECANCELED)
        pl_log(LOG_INFO, "pool: write to a worker: %s", uv_strerror(status));
    pl_wbuf_destroy(&r->w);
    free(r);
}

/* Send 'w' (taken) to worker 'wk'.  0, or -1 (logged). */
static int send_frame(struct worker *wk, struct pl_wbuf *w)
{
    struct wreq *r = calloc(1, sizeof(*r));
    int rc;

    if (!r) {
        pl_wbuf_destroy(w);
        return -1;
    }
    r->w = *w;
    r->req.data = r;
    pl_wframe_header(r->hdr, r->w.sb.size);
    uv_buf_t b[2] = { uv_buf_init((char *)r->hdr, 4),
                      uv_buf_init(r->w.sb.data, (unsigned)r->w.sb.size) };
    if ((rc = uv_write(&r->req, (uv_stream_t *)&wk->pipe, b, 2, write_cb))
        < 0) {
        pl_log(LOG_WARNING, "pool %s worker %llu: write: %s", wk->pool,
               (unsigned long long)wk->wr, uv_strerror(rc));
        pl_wbuf_destroy(&r->w);
        free(r);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ ends */

/* The end of the worker's call, as an event: 'st' with 'why' (copied). */
static void call_end(struct worker *wk, int st, int64_t code, int64_t sig,
                     bool lost, const char *why)
{
    struct pl_event *e;

    if (!wk->busy)
        return;
    wk->busy = false;
    uv_timer_stop(&wk->timer);
    if (!(e = pl_agent_event_add(wk->p->a, wk->id, wk->tattempt, wk->rank,
                                 st)))
        return;
    e->exit_code = code;
    e->signal = sig;
    e->lost = lost;
    if (!lost && wk->crash < 0)
        pl_cpu_since(wk->pid, &wk->cpu0, &e->use); /* none if it is gone */
    if (why && !(e->error = strdup(why)))
        pl_log(LOG_WARNING, "task %llu: its end's reason: out of memory",
               (unsigned long long)wk->id);
}

static void free_cb(uv_handle_t *h)
{
    struct worker *wk = h->data;

    if (--wk->closing == 0) {
        free(wk->buf);
        free(wk);
    }
}

/* SIGKILL the worker's process: an MPI rank may sit out a SIGTERM. */
static void sigkill(struct worker *wk)
{
    if (wk->pid > 0 && kill(wk->pid, SIGKILL) < 0 && errno != ESRCH)
        pl_log(LOG_WARNING, "pool %s: kill worker %d: %s", wk->pool,
               (int)wk->pid, strerror(errno));
}

/* The worker is gone (EOF, an error, or refused): its call ends as what
 * it said or what we did to it. */
static void worker_gone(struct worker *wk, const char *how)
{
    struct pl_wpool *p = wk->p;
    char why[512];

    if (wk->busy) {
        if (wk->killed == PL_ST_TIMEOUT) {
            snprintf(why, sizeof(why), "timeout after %.3g s: its worker "
                     "(pool %s, world rank %llu) was killed, the pool "
                     "restarts", wk->timeout, wk->pool,
                     (unsigned long long)wk->wr);
            call_end(wk, PL_ST_TIMEOUT, -1, -1, false, why);
        }
        else if (wk->killed == PL_ST_CANCELED)
            call_end(wk, PL_ST_CANCELED, -1, -1, false,
                     "canceled: its worker was killed, the pool restarts");
        else if (wk->crash > 0) {
            snprintf(why, sizeof(why), "killed by signal %lld (%s) in the "
                     "function, in worker %llu of pool %s on %s: the pool "
                     "restarts", (long long)wk->crash,
                     strsignal((int)wk->crash), (unsigned long long)wk->wr,
                     wk->pool, p->a->node);
            call_end(wk, PL_ST_FAILED, -1, wk->crash, false, why);
        }
        else if (wk->crash == 0)
            call_end(wk, PL_ST_FAILED, 255, -1, false, "the function called "
                     "exit(): its worker ended, the pool restarts");
        else {
            snprintf(why, sizeof(why), "its worker (pool %s, world rank "
                     "%llu) went down (%s)", wk->pool,
                     (unsigned long long)wk->wr, how);
            call_end(wk, PL_ST_FAILED, -1, -1, true, why);
        }
    }
    if (wk->hello)
        pl_log(LOG_INFO, "pool %s: worker %llu (pid %d) gone: %s", wk->pool,
               (unsigned long long)wk->wr, (int)wk->pid, how);
    /* its job cannot go on without it: the others here go at once
     * (SIGKILL: they may sit out a SIGTERM), pilotd takes down the rest */
    for (struct worker *o = p->workers; wk->hello && o; o = o->next)
        if (o != wk && o->hello && o->job == wk->job
            && o->attempt == wk->attempt)
            sigkill(o);
    for (struct worker **q = &p->workers; *q; q = &(*q)->next)
        if (*q == wk) {
            *q = wk->next;
            p->nworkers--;
            break;
        }
    wk->closing = 2;
    uv_read_stop((uv_stream_t *)&wk->pipe);
    uv_close((uv_handle_t *)&wk->pipe, free_cb);
    uv_close((uv_handle_t *)&wk->timer, free_cb);
}

/* Kill the worker of a call: its MPI job goes down with it (srun
 * --kill-on-bad-exit, mpirun), and the pool restarts. */
static void worker_kill(struct worker *wk, int why)
{
    if (!wk->killed)
        wk->killed = why;
    sigkill(wk);
}

static void timeout_cb(uv_timer_t *h)
{
    struct worker *wk = h->data;

    pl_log(LOG_WARNING, "task %llu rank %llu: timeout after %.3g s: killing "
           "its worker (pool %s): the pool restarts",
           (unsigned long long)wk->id, (unsigned long long)wk->rank,
           wk->timeout, wk->pool);
    worker_kill(wk, PL_ST_TIMEOUT);
}

/* ------------------------------------------------------------ receiving */

static int on_hello(struct worker *wk, const struct pl_msg *m,
                    struct pl_error *errp)
{
    struct pl_whello h;

    if (wk->hello) {
        errno = EPROTO;
        return pl_errprintf(errp, "a second hello");
    }
    if (pl_whello_decode(m->body, &h, errp) < 0)
        return -1;
    snprintf(wk->pool, sizeof(wk->pool), "%s", h.pool);
    wk->job = h.job;
    wk->attempt = h.attempt;
    wk->wr = h.world_rank;
    wk->hello = true;
    pl_log(LOG_INFO, "pool %s: worker %llu of %llu (pid %d) here%s%s",
           wk->pool, (unsigned long long)h.world_rank,
           (unsigned long long)h.world_size, (int)wk->pid,
           h.nccl ? "; no NCCL: " : "", h.nccl ? h.nccl : "");
    pl_whello_clear(&h);
    pl_agent_kick(wk->p->a);
    return 0;
}

static int on_msg(struct worker *wk, const struct pl_msg *m,
                  struct pl_error *errp)
{
    struct pl_wentered en;
    struct pl_wreturn ret;
    int64_t sig;

    if (m->type == PL_MSG_W_HELLO)
        return on_hello(wk, m, errp);
    if (!wk->hello) {
        errno = EPROTO;
        return pl_errprintf(errp, "%s before hello",
                            pl_msg_type_name(m->type));
    }
    switch (m->type) {
    case PL_MSG_W_ENTERED:
        if (pl_wentered_decode(m->body, &en, errp) < 0)
            return -1;
        if (!wk->busy || en.id != wk->id || en.attempt != wk->tattempt)
            break; /* of a call ended meanwhile (killed) */
        wk->entered = true;
        struct pl_event *e = pl_agent_event_add(wk->p->a, wk->id,
                                                wk->tattempt, wk->rank,
                                                PL_ST_RUNNING);
        if (e && en.time > 0)
            e->time = en.time;
        if (e)
            e->pid = wk->pid;
        break;
    case PL_MSG_W_RETURN:
        if (pl_wreturn_decode(m->body, &ret, errp) < 0)
            return -1;
        if (wk->busy && ret.id == wk->id && ret.attempt == wk->tattempt
            && !wk->killed) {
            if (!wk->entered) {
                /* it never ran (no library...): it still ran and ended */
                struct pl_event *e0 = pl_agent_event_add(
                    wk->p->a, wk->id, wk->tattempt, wk->rank,
                    PL_ST_RUNNING);
                if (e0)
                    e0->pid = wk->pid;
            }
            call_end(wk, ret.code ? PL_ST_FAILED : PL_ST_DONE, ret.code, -1,
                     false, ret.error);
        }
        pl_wreturn_clear(&ret);
        break;
    case PL_MSG_W_CRASH:
        if (pl_wcrash_decode(m->body, &sig, errp) < 0)
            return -1;
        wk->crash = sig;
        break;
    default:
        errno = EPROTO;
        return pl_errprintf(errp, "unexpected %s", pl_msg_type_name(m->type));
    }
    return 0;
}

static void alloc_cb(uv_handle_t *h, size_t want, uv_buf_t *b)
{
    struct worker *wk = h->data;
    (void)want;

    if (wk->cap - wk->len < 4096) {
        size_t ncap = wk->cap ? wk->cap * 2 : 8192;
        unsigned char *nb = ncap <= FRAME_MAX + 8192
                                ? realloc(wk->buf, ncap)
                                : NULL;
        if (!nb) {
            *b = uv_buf_init(NULL, 0); /* UV_ENOBUFS: the worker goes */
            return;
        }
        wk->buf = nb;
        wk->cap = ncap;
    }
    *b = uv_buf_init((char *)wk->buf + wk->len, (unsigned)(wk->cap - wk->len));
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct worker *wk = s->data;
    struct pl_error err;
    size_t off = 0;
    (void)b;

    if (n < 0) {
        worker_gone(wk, n == UV_EOF ? "its connection closed"
                                    : uv_strerror((int)n));
        return;
    }
    wk->len += (size_t)n;
    while (wk->len - off >= 4) {
        size_t flen = pl_wframe_len(wk->buf + off);
        struct pl_msg m;
        if (flen > FRAME_MAX) {
            pl_log(LOG_WARNING, "pool: a worker (pid %d) sent a frame of "
                   "%zu bytes: dropped", (int)wk->pid, flen);
            worker_gone(wk, "a bad frame");
            return;
        }
        if (wk->len - off - 4 < flen)
            break;
        int rc = pl_msg_decode(wk->buf + off + 4, flen, &m, &err);
        if (rc == 0) {
            rc = on_msg(wk, &m, &err);
            pl_msg_release(&m);
        }
        if (rc < 0) {
            pl_log(LOG_WARNING, "pool: worker (pid %d): bad message: %s",
                   (int)wk->pid, err.text);
            worker_gone(wk, "a bad message");
            return;
        }
        off += 4 + flen;
    }
    memmove(wk->buf, wk->buf + off, wk->len - off);
    wk->len -= off;
}

static void accept_cb(uv_stream_t *ls, int status)
{
    struct pl_wpool *p = ls->data;
    struct worker *wk;
    struct ucred cred;
    socklen_t clen = sizeof(cred);
    uv_os_fd_t fd;

    if (status < 0 || !(wk = calloc(1, sizeof(*wk)))) {
        pl_log(LOG_WARNING, "pool: accept: %s",
               status < 0 ? uv_strerror(status) : "out of memory");
        return;
    }
    wk->p = p;
    wk->crash = -1;
    uv_pipe_init(ls->loop, &wk->pipe, 0);
    uv_timer_init(ls->loop, &wk->timer);
    wk->pipe.data = wk->timer.data = wk;
    wk->next = p->workers;
    p->workers = wk;
    p->nworkers++;
    if (uv_accept(ls, (uv_stream_t *)&wk->pipe) < 0
        || uv_fileno((uv_handle_t *)&wk->pipe, &fd) < 0
        || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
        worker_gone(wk, "accept failed");
        return;
    }
    /* an abstract socket has no permissions: anyone on the node may
     * connect; only our own user's processes are workers of ours */
    if (cred.uid != getuid()) {
        pl_log(LOG_WARNING, "pool: refused a connection from uid %u pid %d",
               (unsigned)cred.uid, (int)cred.pid);
        worker_gone(wk, "not our user");
        return;
    }
    wk->pid = cred.pid;
    uv_read_start((uv_stream_t *)&wk->pipe, alloc_cb, read_cb);
}

/* ------------------------------------------------------------ the API */

struct pl_wpool *pl_wpool_new(struct pl_agent *a, const char *keydir,
                              const char *node, struct pl_error *errp)
{
    struct pl_wpool *p = calloc(1, sizeof(*p));
    char prefix[PL_POOL_PREFIX_MAX];
    struct sockaddr_un sa;
    socklen_t salen;
    int fd = -1, rc;

    if (!p) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    p->a = a;
    pl_pool_sock_prefix(keydir, prefix);
    if (pl_pool_sock_addr(prefix, node, &sa, &salen) < 0) {
        pl_errprintf(errp, "pool socket: node name '%s' too long", node);
        goto error;
    }
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                     0)) < 0
        || bind(fd, (struct sockaddr *)&sa, salen) < 0
        || listen(fd, 128) < 0) {
        pl_errprintf(errp, "pool socket @%s: %s", sa.sun_path + 1,
                     strerror(errno));
        goto error;
    }
    uv_pipe_init(&a->loop, &p->listener, 0);
    p->listener.data = p;
    p->listening = true;
    if ((rc = uv_pipe_open(&p->listener, fd)) < 0
        || (rc = uv_listen((uv_stream_t *)&p->listener, 128, accept_cb))
               < 0) {
        pl_errprintf(errp, "pool socket: %s", uv_strerror(rc));
        fd = -1; /* the handle has it */
        goto error;
    }
    pl_log(LOG_INFO, "pool workers' socket: @%s", sa.sun_path + 1);
    return p;
error:
    if (fd >= 0)
        close(fd);
    pl_wpool_close(p);
    return NULL;
}

static void listener_cb(uv_handle_t *h)
{
    free(h->data);
}

void pl_wpool_close(struct pl_wpool *p)
{
    if (!p)
        return;
    while (p->workers)
        worker_gone(p->workers, "the agent is stopping");
    if (p->listening)
        uv_close((uv_handle_t *)&p->listener, listener_cb);
    else
        free(p);
}

static struct worker *find(struct pl_wpool *p, const struct pl_run *r)
{
    for (struct worker *wk = p->workers; wk; wk = wk->next)
        if (wk->hello && wk->job == r->pool_job
            && wk->attempt == r->pool_attempt && wk->wr == r->world_rank)
            return wk;
    return NULL;
}

/* The rank of 'r' cannot be given to a worker: lost, so that it runs
 * again (its pool restarting, most likely). */
static void refuse(struct pl_wpool *p, const struct pl_run *r, const char *why)
{
    struct pl_event *e = pl_agent_event_add(p->a, r->id, r->attempt, r->rank,
                                            PL_ST_FAILED);

    pl_log(LOG_INFO, "task %llu rank %llu: %s", (unsigned long long)r->id,
           (unsigned long long)r->rank, why);
    if (!e)
        return;
    e->lost = true;
    e->error = strdup(why);
}

void pl_wpool_call(struct pl_wpool *p, const struct pl_run *r)
{
    struct worker *wk = find(p, r);
    char why[512];
    struct pl_error err;
    int fd;

    if (wk && wk->busy && wk->id == r->id && wk->tattempt == r->attempt
        && wk->rank == r->rank)
        return; /* a RUN sent again: it runs */
    if (!wk || wk->busy || wk->killed) {
        snprintf(why, sizeof(why), "pool %s has no %s worker %llu on this "
                 "node (job %llu attempt %llu)", r->pool,
                 wk ? "free" : "such", (unsigned long long)r->world_rank,
                 (unsigned long long)r->pool_job,
                 (unsigned long long)r->pool_attempt);
        refuse(p, r, why);
        return;
    }
    /* the output files, made and checked here as a task's are: the
     * worker appends to them */
    if ((fd = pl_output_open(r->out, true, &err)) < 0
        || (close(fd), (fd = pl_output_open(r->err, true, &err)) < 0)) {
        struct pl_event *e = pl_agent_event_add(p->a, r->id, r->attempt,
                                                r->rank, PL_ST_FAILED);
        if (e) {
            e->exit_code = 127;
            e->error = strdup(err.text);
        }
        return;
    }
    close(fd);
    int64_t idx = -1;
    for (char **e = r->env; e && *e; e++)
        if (!strncmp(*e, "PILOT_ARRAY_INDEX=", 18))
            idx = strtoll(*e + 18, NULL, 10);
    struct pl_wcall c = {
        .id = r->id, .attempt = r->attempt, .rank = r->rank,
        .size = r->size, .group = r->group, .fn = r->fn, .argv = r->argv,
        .env = r->env, .cwd = r->cwd, .out = r->out, .err = r->err,
        .array_index = idx,
    };
    struct pl_wbuf w;
    pl_wcall_encode(&w, &c);
    if (send_frame(wk, &w) < 0) {
        refuse(p, r, "its worker could not be written to");
        return;
    }
    wk->busy = true;
    wk->entered = false;
    pl_cpu_mark(wk->pid, &wk->cpu0);
    wk->id = r->id;
    wk->tattempt = r->attempt;
    wk->rank = r->rank;
    wk->timeout = r->timeout;
    if (r->timeout > 0)
        uv_timer_start(&wk->timer, timeout_cb,
                       (uint64_t)(r->timeout * 1000.0 + 0.5), 0);
    pl_log(LOG_INFO, "task %llu rank %llu: called in pool %s worker %llu",
           (unsigned long long)r->id, (unsigned long long)r->rank, r->pool,
           (unsigned long long)r->world_rank);
}

size_t pl_wpool_kill(struct pl_wpool *p, const struct pl_kill *k)
{
    size_t n = 0;

    /* the pool's job itself: all its workers here */
    for (struct worker *wk = p->workers; wk; wk = wk->next)
        if (wk->hello && wk->job == k->id && wk->attempt == k->attempt) {
            sigkill(wk);
            n++;
        }
    if (n)
        pl_log(LOG_INFO, "pool job %llu attempt %llu: killed its %zu "
               "workers here", (unsigned long long)k->id,
               (unsigned long long)k->attempt, n);
    for (struct worker *wk = p->workers; wk; wk = wk->next) {
        if (!wk->busy || wk->id != k->id || wk->tattempt != k->attempt
            || (k->one && wk->rank != k->rank))
            continue;
        pl_log(LOG_INFO, "task %llu rank %llu: kill: its worker (pool %s) "
               "goes, and the pool restarts", (unsigned long long)k->id,
               (unsigned long long)wk->rank, wk->pool);
        worker_kill(wk, PL_ST_CANCELED);
        n++;
    }
    return n;
}

size_t pl_wpool_held(const struct pl_wpool *p, struct pl_held *out,
                     size_t max)
{
    size_t n = 0;

    for (const struct worker *wk = p ? p->workers : NULL; wk; wk = wk->next)
        if (wk->busy) {
            if (n < max)
                out[n] = (struct pl_held){ .id = wk->id,
                                           .attempt = wk->tattempt,
                                           .rank = wk->rank };
            n++;
        }
    return n;
}

void pl_wpool_report(struct pl_wpool *p, bool again)
{
    if (!p || !p->a->welcomed)
        return;
    for (struct worker *wk = p->workers; wk; wk = wk->next)
        if (again)
            wk->reported = false;
    /* one POOL_READY per job attempt seen among the unreported */
    for (struct worker *wk = p->workers; wk; wk = wk->next) {
        if (!wk->hello || wk->reported)
            continue;
        uint64_t ranks[p->nworkers];
        struct pl_pool_ready pr = { .job = wk->job, .attempt = wk->attempt,
                                    .ranks = ranks };
        for (struct worker *o = wk; o; o = o->next)
            if (o->hello && !o->reported && o->job == wk->job
                && o->attempt == wk->attempt) {
                ranks[pr.nranks++] = o->wr;
                o->reported = true;
            }
        pl_agent_pool_ready_send(p->a, &pr);
    }
}
