/* agent/vet.c - the node's vetting: pilotd's VET run in a child process,
 * its result sent back as VET_RESULT
 *
 * The checks block (a compute loop on each core, statvfs on a network
 * file system, an external program), so they run in a process of their
 * own: this program again, `--vet-child` (agent/vet_child.c), with the VET
 * on its stdin and the VET_RESULT on its stdout, watched by the loop like
 * any child.  One vetting runs at a time; a VET that comes meanwhile runs
 * after it (only the last such).  A check process that fails, prints no
 * result or outlives the VET's timeout (+5 s) gives a failed check named
 * "vet".
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent_private.h"
#include "agent/vet.h"
#include "proto/log.h"
#include "proto/strv.h"
#include "proto/vetmsg.h"

#define GRACE_MS 5000           /* beyond the VET's own timeout */
#define OUT_MAX (1024 * 1024)   /* bytes of a result we read */

struct pl_vet {
    struct pl_agent *a;
    uv_timer_t timer;
    uv_process_t proc;
    uv_pipe_t in, out;
    uv_write_t wreq;
    int live;                   /* handles open, the timer's included */
    int run_open;               /* this run's: proc, in, out */
    bool running, closing;
    bool exited, timed_out;
    int64_t status;
    int term_signal;
    uint64_t token;
    double started;             /* pl_agent_now() */
    struct pl_wbuf msg;         /* the child's stdin */
    bool has_msg;
    struct pl_wbuf next;        /* a VET that came while one ran */
    uint64_t next_token;
    bool has_next;
    char *buf;                  /* the child's stdout */
    size_t len, cap;
};

static void finish(struct pl_vet *v);

static void close_cb(uv_handle_t *h)
{
    struct pl_vet *v = h->data;

    v->live--;
    if (h != (uv_handle_t *)&v->timer)
        v->run_open--;
    if (v->closing && v->live == 0) {
        if (v->has_msg)
            pl_wbuf_destroy(&v->msg);
        if (v->has_next)
            pl_wbuf_destroy(&v->next);
        free(v->buf);
        free(v);
        return;
    }
    if (!v->closing && v->running && v->run_open == 0)
        finish(v);
}

static void close_one(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, close_cb);
}

struct pl_vet *pl_vet_new(struct pl_agent *a)
{
    struct pl_vet *v = calloc(1, sizeof(*v));

    if (!v)
        return NULL;
    v->a = a;
    uv_timer_init(&a->loop, &v->timer);
    v->timer.data = v;
    v->live = 1;
    return v;
}

bool pl_vet_child(const struct pl_vet *v, pid_t pid)
{
    return v && v->running && !v->exited && v->proc.pid == pid;
}

void pl_vet_close(struct pl_vet *v)
{
    if (!v || v->closing)
        return;
    v->closing = true;
    if (v->running) {
        if (!v->exited)
            uv_process_kill(&v->proc, SIGKILL);
        close_one((uv_handle_t *)&v->proc);
        close_one((uv_handle_t *)&v->in);
        close_one((uv_handle_t *)&v->out);
    }
    close_one((uv_handle_t *)&v->timer);
}

/* ------------------------------------------------------------ the result */

/* The result of a run whose process gave none: one failed check. */
static void failed_result(struct pl_vet *v, struct pl_vet_result *r,
                          struct pl_vet_check *c, char *why)
{
    memset(r, 0, sizeof(*r));
    r->node = v->a->node;
    r->token = v->token;
    r->time = pl_now();
    r->took = pl_agent_now(v->a) - v->started;
    r->ok = false;
    static char name[] = "vet";

    *c = (struct pl_vet_check){ .name = name, .ok = false, .figure = NAN,
                                .limit = NAN, .detail = why };
    r->check = c;
    r->ncheck = 1;
}

static void run_next(struct pl_vet *v);

static void finish(struct pl_vet *v)
{
    struct pl_vet_result r, fr;
    struct pl_vet_check fc;
    struct pl_msg m;
    struct pl_error err;
    char why[256];
    bool have = false;

    v->running = false;
    uv_timer_stop(&v->timer);
    if (v->timed_out)
        snprintf(why, sizeof(why), "the checks took longer than their "
                 "timeout");
    else if (v->term_signal)
        snprintf(why, sizeof(why), "the checks' process was killed by "
                 "signal %d", v->term_signal);
    else if (v->status)
        snprintf(why, sizeof(why), "the checks' process exited with %lld "
                 "(the agent's log says why)", (long long)v->status);
    else if (!v->len || pl_msg_decode(v->buf, v->len, &m, &err) < 0)
        snprintf(why, sizeof(why), "the checks' process gave no result");
    else {
        if (m.type != PL_MSG_VET_RESULT)
            snprintf(why, sizeof(why), "the checks' process gave a %s",
                     pl_msg_type_name(m.type));
        else if (pl_vet_result_decode(m.body, &r, &err) < 0)
            snprintf(why, sizeof(why), "the checks' result: %.200s",
                     err.text);
        else
            have = true;
        pl_msg_release(&m);
    }
    v->len = 0;
    if (have) {
        r.token = v->token;
        pl_log(r.ok ? LOG_INFO : LOG_WARNING, "vetting %s in %.2f s (%u "
               "checks)", r.ok ? "passed" : "FAILED", r.took, r.ncheck);
        for (uint32_t i = 0; i < r.ncheck; i++)
            if (!r.check[i].ok)
                pl_log(LOG_WARNING, "vet check %s failed: %s",
                       r.check[i].name,
                       r.check[i].detail ? r.check[i].detail : "");
        pl_agent_vet_result_send(v->a, &r);
        pl_vet_result_clear(&r);
    }
    else {
        pl_log(LOG_WARNING, "vetting: %s", why);
        failed_result(v, &fr, &fc, why);
        pl_agent_vet_result_send(v->a, &fr);
    }
    run_next(v);
}

/* ------------------------------------------------------------ the child */

static void exit_cb(uv_process_t *p, int64_t status, int term_signal)
{
    struct pl_vet *v = p->data;

    v->exited = true;
    v->status = status;
    v->term_signal = term_signal;
    close_one((uv_handle_t *)&v->proc);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    struct pl_vet *v = h->data;

    (void)hint;
    if (v->cap - v->len < 4096 && v->cap < OUT_MAX) {
        char *nb = realloc(v->buf, v->cap ? 2 * v->cap : 16384);
        if (nb) {
            v->buf = nb;
            v->cap = v->cap ? 2 * v->cap : 16384;
        }
    }
    *b = uv_buf_init(v->buf + v->len, (unsigned)(v->cap - v->len));
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct pl_vet *v = s->data;

    (void)b;
    if (n > 0)
        v->len += (size_t)n;
    if (n < 0 || v->len >= v->cap) {
        /* EOF, an error, or more than a result: done reading */
        uv_read_stop(s);
        close_one((uv_handle_t *)s);
    }
}

static void write_cb(uv_write_t *req, int status)
{
    struct pl_vet *v = req->data;

    (void)status; /* a child that died early: its exit says so */
    close_one((uv_handle_t *)&v->in);
}

static void timer_cb(uv_timer_t *t)
{
    struct pl_vet *v = t->data;

    if (v->running && !v->exited) {
        v->timed_out = true;
        uv_process_kill(&v->proc, SIGKILL);
    }
}

/* Start the check process on v->msg.  0, or -1 with 'why' (nothing runs
 * and nothing is open). */
static int spawn(struct pl_vet *v, double timeout, char *why, size_t len)
{
    struct pl_agent *a = v->a;
    char exe[4096], cores[8192], gpus[4096] = "";
    size_t elen = sizeof(exe);
    uint32_t ncores;
    const uint64_t *cpu = pl_resources_cores(a->res, &ncores);
    char *const *ids = pl_resources_gpu_ids(a->res);
    static char a_child[] = "--vet-child", a_node[] = "--node",
                a_cores[] = "--cores", a_gpus[] = "--gpus", a_dir[] = "--dir";
    char *args[12];
    int n = 0, rc;

    if ((rc = uv_exepath(exe, &elen)) < 0) {
        snprintf(why, len, "own program: %s", uv_strerror(rc));
        return -1;
    }
    pl_idlist_format(cores, sizeof(cores), cpu, ncores);
    for (size_t i = 0; ids && ids[i]; i++) {
        size_t l = strlen(gpus);
        snprintf(gpus + l, sizeof(gpus) - l, "%s%s", l ? "," : "", ids[i]);
    }
    args[n++] = exe;
    args[n++] = a_child;
    args[n++] = a_node;
    args[n++] = a->node;
    args[n++] = a_cores;
    args[n++] = cores;
    args[n++] = a_gpus;
    args[n++] = gpus;
    if (a->dir[0]) {
        args[n++] = a_dir;
        args[n++] = a->dir;
    }
    args[n] = NULL;
    uv_pipe_init(&a->loop, &v->in, 0);
    uv_pipe_init(&a->loop, &v->out, 0);
    v->in.data = v->out.data = v->proc.data = v;
    v->live += 2;
    v->run_open = 2;
    uv_stdio_container_t stdio[3] = {
        { .flags = UV_CREATE_PIPE | UV_READABLE_PIPE,
          .data.stream = (uv_stream_t *)&v->in },
        { .flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
          .data.stream = (uv_stream_t *)&v->out },
        { .flags = UV_INHERIT_FD, .data.fd = 2 },
    };
    uv_process_options_t opt = {
        .exit_cb = exit_cb, .file = exe, .args = args,
        .stdio_count = 3, .stdio = stdio,
    };
    v->exited = v->timed_out = false;
    v->status = 0;
    v->term_signal = 0;
    v->len = 0;
    if ((rc = uv_spawn(&a->loop, &v->proc, &opt)) < 0) {
        snprintf(why, len, "the checks' process: %s", uv_strerror(rc));
        /* uv_spawn() leaves the handle to close */
        v->live++;
        v->run_open++;
        return -1;
    }
    v->live++;
    v->run_open++;
    uv_buf_t b = uv_buf_init(v->msg.sb.data, (unsigned)v->msg.sb.size);
    v->wreq.data = v;
    if (uv_write(&v->wreq, (uv_stream_t *)&v->in, &b, 1, write_cb) < 0)
        close_one((uv_handle_t *)&v->in);
    uv_read_start((uv_stream_t *)&v->out, alloc_cb, read_cb);
    uv_timer_start(&v->timer, timer_cb, (uint64_t)(timeout * 1000) + GRACE_MS,
                   0);
    return 0;
}

/* Run VET 'token' of settings 'c' now. */
static void run(struct pl_vet *v, uint64_t token, const struct pl_vetconf *c)
{
    char why[256];

    if (v->has_msg)
        pl_wbuf_destroy(&v->msg);
    pl_vet_encode(&v->msg, 0, token, c);
    v->has_msg = true;
    v->token = token;
    v->started = pl_agent_now(v->a);
    v->running = true;
    pl_log(LOG_INFO, "vetting the node (token %llu)",
           (unsigned long long)token);
    if (spawn(v, c->timeout, why, sizeof(why)) == 0)
        return;
    /* the handles spawn() opened close, and then finish() reports */
    v->status = -1;
    pl_log(LOG_WARNING, "vetting: %s", why);
    close_one((uv_handle_t *)&v->proc);
    close_one((uv_handle_t *)&v->in);
    close_one((uv_handle_t *)&v->out);
}

static void run_next(struct pl_vet *v)
{
    struct pl_msg m;
    struct pl_error err;
    struct pl_vetconf c;
    uint64_t token;

    if (!v->has_next || v->closing)
        return;
    v->has_next = false;
    /* our own encoding: it decodes */
    if (pl_msg_decode(v->next.sb.data, v->next.sb.size, &m, &err) == 0) {
        if (pl_vet_decode(m.body, &token, &c, &err) == 0) {
            run(v, token, &c);
            pl_vetconf_clear(&c);
        }
        pl_msg_release(&m);
    }
    pl_wbuf_destroy(&v->next);
}

/* ------------------------------------------------------------ VET */

int pl_agent_vet_cb(struct pl_agent *a, const struct pl_msg *m,
                    struct pl_error *errp)
{
    struct pl_vet *v = a->vet;
    struct pl_vetconf c;
    uint64_t token;

    if (pl_vet_decode(m->body, &token, &c, errp) < 0)
        return -1;
    if (a->bench || !v) {
        /* a bench agent checks nothing: its node is fit */
        struct pl_vet_result r = { .node = a->node, .token = token,
                                   .time = pl_now(), .ok = true };
        pl_agent_vet_result_send(a, &r);
    }
    else if (v->running) {
        if (v->has_next)
            pl_wbuf_destroy(&v->next);
        pl_vet_encode(&v->next, 0, token, &c);
        v->has_next = true;
    }
    else
        run(v, token, &c);
    pl_vetconf_clear(&c);
    return 0;
}
