/* agent/agent.c - the agent's life: start, pilotd's messages, shutdown
 *
 * One pl_agent per process, embedding the process's one loop.  This file
 * has its life cycle, the table of handlers for pilotd's messages, the
 * SIGCHLD watcher and the flush timer, which runs once per iteration that
 * changed something (pl_agent_kick()), or FLUSH_SOON_MS after a start
 * (pl_agent_kick_soon(): a no-op task's end joins its start): it frees
 * the tasks that exited, starts the prefetched ones their cores take,
 * and, unless it holds prefetched tasks still (then the events wait up
 * to HOLD_MS for the next ends: hold_events()), sends the events as one
 * EVENTS message, then a
 * PULL if one is due (so that pilotd frees the cores before it answers)
 * and no end of a one-rank task went before it (that end makes pilotd
 * schedule the cores by itself).  The link
 * to pilotd is link.c; the tasks, from a RUN entry to a process, run.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/prefetch.h"
#include "agent/agent_private.h"
#include "agent/pool.h"
#include "agent/pyw.h"
#include "agent/env.h"
#include "agent/vet.h"
#include "proto/log.h"
#include "proto/state.h"

extern char **environ;

#define EXIT_GRACE 5.0       /* s from SIGTERM to SIGKILL on EXIT */
#define EXIT_WAIT_MS 5000    /* after the grace, give up on the tasks */
#define LEFTOVER_WAIT 10     /* s for a dead agent's tasks to die */
#define OUTPUT_CHECK_MS 250  /* between two looks at the output sizes */
#define FLUSH_SOON_MS 2      /* pl_agent_kick_soon(): a start waits this */
/* While the agent holds prefetched entries, pilotd's answer to an end is
 * not on any core's path (the next held entry starts on the cores the
 * end freed, in the same flush): the events wait up to HOLD_MS for those
 * of the next ends, so that one EVENTS message and one commit in pilotd
 * carry several tasks; HOLD_EVENTS of them send at once.  2 ms is what a
 * start already waits for its end (FLUSH_SOON_MS). */
#define HOLD_MS 2            /* the default of pl_agent_set_hold() */
#define HOLD_EVENTS 64

/* ---- the flush timer ---- */

static void flush_cb(uv_timer_t *h);

void pl_agent_kick(struct pl_agent *a)
{
    if (!a->finished
        && (a->flush_soon || !uv_is_active((uv_handle_t *)&a->flush))) {
        a->flush_soon = false;
        uv_timer_start(&a->flush, flush_cb, 0, 0);
    }
}

void pl_agent_kick_soon(struct pl_agent *a)
{
    if (!a->finished && !uv_is_active((uv_handle_t *)&a->flush)) {
        a->flush_soon = true;
        uv_timer_start(&a->flush, flush_cb, FLUSH_SOON_MS, 0);
    }
}

static void finish(struct pl_agent *a)
{
    uv_timer_stop(&a->flush);
    uv_timer_stop(&a->got);
    uv_timer_stop(&a->deadline);
    uv_timer_stop(&a->outcheck);
    pl_agent_link_stop(a);
    a->finished = true;
    uv_stop(&a->loop);
    pl_log(LOG_NOTICE, "stopped");
}

/* Whether this flush's events may wait for the next ones: only while
 * entries are still held after the starts (the cores stay busy without
 * pilotd: an idle agent, or one whose last held entry just started,
 * sends at once, as does one exiting or not yet welcomed), until HOLD_MS
 * after the oldest of them was added and for HOLD_EVENTS events at most.
 * When true the flush timer is armed for what is left of the window, as
 * a delayed one: an end kicked meanwhile runs the flush at once (its
 * cores start the next held entry), which holds again. */
static bool hold_events(struct pl_agent *a)
{
    uint64_t now = uv_now(&a->loop);

    if (a->nevents == 0 || a->nevents >= HOLD_EVENTS || !a->welcomed
        || a->exiting || pl_prefetch_len(a->pref) == 0
        || now - a->events_ms >= a->hold_ms)
        return false;
    a->flush_soon = true;
    uv_timer_start(&a->flush, flush_cb, a->events_ms + a->hold_ms - now, 0);
    return true;
}

static void flush_cb(uv_timer_t *h)
{
    struct pl_agent *a = h->data;

    a->flush_soon = false;
    pl_agent_free_dead(a);
    pl_wpool_report(a->wpool, false);
    pl_agent_prefetch_start(a); /* its 'running' after the ends */
    /* the GOT and a PULL go with the events (the window is far inside
     * GOT_MS and ORDER_RESEND; the held ends free the cores a PULL names) */
    if (hold_events(a))
        return;
    pl_prefetch_reset(a->pref); /* the ends leave: their cores are pilotd's */
    pl_agent_events_send(a);
    pl_agent_got_send(a);
    pl_agent_pull(a);
    if (a->exiting && a->nrunning == 0 && pl_pyw_busy(a->pyw) == 0
        && !a->outq)
        finish(a);
}

/* ---- signals, shutdown ---- */

/* The children that are not tasks: the processes a task left behind
 * when their parent died (we are their subreaper).  A task's own exit is
 * left to pl_task_reap(). */
static void reap_orphans(struct pl_agent *a)
{
    for (int n = 0; n < 1024; n++) {
        siginfo_t info;
        bool task = false;
        memset(&info, 0, sizeof(info));
        if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0
            || info.si_pid == 0)
            return;
        for (size_t i = 0; i < a->nrunning && !task; i++)
            task = pl_task_pid(a->running[i]) == info.si_pid;
        if (task || pl_pyw_child(a->pyw, info.si_pid)
            || pl_vet_child(a->vet, info.si_pid)
            || pl_gpusample_child(a->gsample, info.si_pid))
            return; /* its SIGCHLD is on its way */
        (void)waitpid(info.si_pid, NULL, WNOHANG);
    }
}

static void sigchld_cb(uv_signal_t *h, int signum)
{
    struct pl_agent *a = h->data;

    (void)signum;
    /* backwards: an ended task leaves 'running' by a swap with the last,
     * which was seen already */
    for (size_t i = a->nrunning; i-- > 0;)
        if (i < a->nrunning)
            pl_task_reap(a->running[i]);
    pl_pyw_reap(a->pyw);
    reap_orphans(a);
}

static void deadline_cb(uv_timer_t *h)
{
    struct pl_agent *a = h->data;

    if (a->nrunning)
        pl_log(LOG_WARNING, "%zu tasks still running after SIGKILL: "
               "giving up on them", a->nrunning);
    for (size_t i = 0; i < a->nrunning; i++) {
        const struct pl_run *r = pl_task_entry(a->running[i]);
        struct pl_event *e = pl_agent_event_add(a, r->id, r->attempt,
                                                r->rank, PL_ST_CANCELED);
        if (e)
            e->error = strdup("did not exit after SIGKILL");
    }
    pl_agent_events_send(a);
    if (a->outq)
        pl_log(LOG_WARNING, "%zu messages to pilotd not sent", a->noutq);
    finish(a);
}

void pl_agent_shutdown(struct pl_agent *a, const char *why)
{
    /* N.B. idempotent, with no "second signal means SIGKILL now": with
     * --local, PR_SET_PDEATHSIG sends SIGTERM once for every thread of
     * the dying pilotd that we get reparented to (ZeroMQ's threads too),
     * so several arrive within microseconds.  The deadline bounds the
     * wait instead. */
    if (a->exiting || a->finished) {
        pl_log(LOG_DEBUG, "%s: already shutting down", why);
        return;
    }
    a->exiting = true;
    pl_log(LOG_NOTICE, "shutting down (%s): stopping %zu tasks", why,
           a->nrunning);
    uv_timer_stop(&a->reg); /* no REGISTER while we stop */
    for (size_t i = 0; i < a->nrunning; i++)
        pl_task_kill(a->running[i], PL_ST_CANCELED, EXIT_GRACE);
    pl_pyw_shutdown(a->pyw);
    uv_timer_start(&a->deadline, deadline_cb,
                   (uint64_t)(EXIT_GRACE * 1000) + EXIT_WAIT_MS, 0);
    pl_agent_kick(a);
}

/* ---- messages from pilotd ---- */

static int exit_msg_cb(struct pl_agent *a, const struct pl_msg *m,
                       struct pl_error *errp)
{
    (void)m;
    (void)errp;
    pl_agent_shutdown(a, "exit message");
    return 0;
}

static int ping_cb(struct pl_agent *a, const struct pl_msg *m,
                   struct pl_error *errp)
{
    (void)a;
    (void)m;
    (void)errp;
    return 0; /* 'heard' is set for any message */
}

static int reply_cb(struct pl_agent *a, const struct pl_msg *m,
                    struct pl_error *errp)
{
    int64_t errnum;
    char *text;
    const msgpack_object *data;

    (void)a;
    if (pl_reply_decode(m->body, &errnum, &text, &data, errp) < 0)
        return -1;
    if (errnum)
        pl_log(LOG_WARNING, "pilotd refused message %llu: %s",
               (unsigned long long)m->seq, text ? text : strerror((int)errnum));
    free(text);
    return 0;
}

static const struct {
    int type;
    int (*cb)(struct pl_agent *a, const struct pl_msg *m,
              struct pl_error *errp);
} handlers[] = {
    { PL_MSG_WELCOME, pl_agent_welcome_cb },
    { PL_MSG_RUN, pl_agent_run_cb },
    { PL_MSG_KILL, pl_agent_kill_cb },
    { PL_MSG_EXIT, exit_msg_cb },
    { PL_MSG_REPLY, reply_cb },
    { PL_MSG_ACK, pl_agent_ack_cb },
    { PL_MSG_REREGISTER, pl_agent_reregister_cb },
    { PL_MSG_PING, ping_cb },
    { PL_MSG_VET, pl_agent_vet_cb },
    { 0, NULL },
};

void pl_agent_dispatch(struct pl_agent *a, const void *buf, size_t len)
{
    struct pl_msg m;
    struct pl_error err;
    int i;

    if (pl_msg_decode(buf, len, &m, &err) < 0) {
        pl_log(LOG_WARNING, "dropped a message: %s", err.text);
        return;
    }
    pl_log(LOG_DEBUG, "received %s (seq %llu, %zu bytes)",
           pl_msg_type_name(m.type), (unsigned long long)m.seq, len);
    a->heard = pl_agent_now(a);
    for (i = 0; handlers[i].cb; i++)
        if (handlers[i].type == m.type)
            break;
    if (!handlers[i].cb)
        pl_log(LOG_WARNING, "dropped a %s message: not for an agent",
               pl_msg_type_name(m.type));
    else if (handlers[i].cb(a, &m, &err) < 0)
        pl_log(LOG_WARNING, "dropped a %s message: %s",
               pl_msg_type_name(m.type), err.text);
    pl_msg_release(&m);
}

/* ---- life cycle ---- */

int pl_agent_pool_listen(struct pl_agent *a, const char *keydir,
                         struct pl_error *errp)
{
    if (a->bench)
        return 0;
    return (a->wpool = pl_wpool_new(a, keydir, a->node, errp)) ? 0 : -1;
}

void pl_agent_set_bench(struct pl_agent *a, bool on)
{
    a->bench = on;
}

void pl_agent_set_hold(struct pl_agent *a, unsigned ms)
{
    a->hold_ms = ms;
}

void pl_agent_set_gpu_sample(struct pl_agent *a, double secs)
{
    a->gpu_sample = secs;
}

/* The GPU sampler's child, on a node with GPUs (agent/gpusample.h). */
static void gpu_sample_start(struct pl_agent *a)
{
    char prog[PL_PATH_MAX];
    size_t len = sizeof(prog);
    struct pl_error err;
    int rc;

    if (a->bench || a->gpu_sample <= 0 || !pl_resources_ngpus(a->res)) {
        pl_log(LOG_INFO, "GPU sampling: not started: %s", a->bench
                   ? "bench mode" : a->gpu_sample <= 0 ? "--gpu-sample 0"
                                                       : "no GPU here");
        return;
    }
    if ((rc = uv_exepath(prog, &len)) < 0) {
        pl_log(LOG_WARNING, "GPU sampling: not started: our program's "
               "path: %s", uv_strerror(rc));
        return;
    }
    if (!(a->gsample = pl_gpusample_new(&a->loop, a->res))
        || pl_gpusample_start(a->gsample, prog, a->gpu_sample, &err) < 0) {
        pl_log(LOG_WARNING, "GPU sampling: not started: %s",
               a->gsample ? err.text : "out of memory");
        pl_gpusample_free(a->gsample);
        a->gsample = NULL;
    }
}

void pl_agent_set_recovery(struct pl_agent *a, const char *dir,
                           double orphan_after)
{
    snprintf(a->dir, sizeof(a->dir), "%s", dir ? dir : "");
    a->orphan_after = orphan_after;
}

uv_loop_t *pl_agent_loop(struct pl_agent *a)
{
    return &a->loop;
}

int pl_agent_exit_code(const struct pl_agent *a)
{
    return a->exit_code;
}

struct pl_agent *pl_agent_new(const char *endpoint,
                              const struct pl_keys_peer *keys,
                              struct pl_resources **resp,
                              struct pl_error *errp)
{
    struct pl_agent *a;
    int rc;

    if (strlen(endpoint) >= sizeof(((struct pl_agent *)0)->endpoint)) {
        errno = EINVAL;
        pl_errprintf(errp, "endpoint too long");
        return NULL;
    }
    if (!(a = calloc(1, sizeof(*a)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    a->devnull = -1;
    a->hold_ms = HOLD_MS;
    pl_outdir_init(&a->outdir);
    a->outq_tail = &a->outq;
    a->gpu_sample = PL_AGENT_GPU_SAMPLE;
    if ((rc = uv_loop_init(&a->loop)) < 0) {
        pl_errprintf(errp, "uv_loop_init: %s", uv_strerror(rc));
        free(a);
        errno = -rc;
        return NULL;
    }
    a->res = *resp;
    a->keys = *keys;
    snprintf(a->endpoint, sizeof(a->endpoint), "%s", endpoint);
    snprintf(a->node, sizeof(a->node), "%s", pl_resources_node(a->res));
    /* every timer now, so that pl_agent_free() may close them all */
    uv_timer_init(&a->loop, &a->flush);
    uv_timer_init(&a->loop, &a->reg);
    uv_timer_init(&a->loop, &a->heartbeat);
    uv_timer_init(&a->loop, &a->deadline);
    uv_timer_init(&a->loop, &a->watch);
    uv_timer_init(&a->loop, &a->outcheck);
    uv_timer_init(&a->loop, &a->got);
    a->outcheck.data = a->got.data = a;
    a->flush.data = a->reg.data = a->heartbeat.data = a->deadline.data = a;
    a->watch.data = a;
    a->sigchld.data = a;
    if ((rc = uv_signal_init(&a->loop, &a->sigchld)) == 0) {
        a->sigchld_ok = true;
        rc = uv_signal_start(&a->sigchld, sigchld_cb, SIGCHLD);
    }
    if (rc < 0) {
        errno = -rc;
        pl_errprintf(errp, "SIGCHLD watcher: %s", uv_strerror(rc));
        goto error;
    }
    if ((a->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        pl_errprintf(errp, "/dev/null: %s", strerror(errno));
        goto error;
    }
    /* every task starts from our environment less the variables of our
     * own srun step: built once, copied per task */
    if (!(a->base_env = pl_env_new(environ))) {
        pl_errprintf(errp, "out of memory");
        goto error;
    }
    pl_env_drop_step(a->base_env);
    if (!(a->envcache = pl_env_cache_new(a->base_env))) {
        pl_errprintf(errp, "out of memory");
        goto error;
    }
    if (pl_owner_make(a->owner, sizeof(a->owner), a->keys.server, a->node)
        < 0) {
        errno = EINVAL;
        pl_errprintf(errp, "node name too long for the tasks' key");
        goto error;
    }
    if (!(a->pyw = pl_pyw_new(a)) || !(a->vet = pl_vet_new(a))
        || !(a->pref = pl_prefetch_new())) {
        pl_errprintf(errp, "out of memory");
        goto error;
    }
    if (!(a->cpu = pl_bind_cpu_new(a->res, errp))
        || !(a->cuda = pl_bind_cuda_new(a->res, errp))
        || pl_agent_link_open(a, errp) < 0)
        goto error;
    *resp = NULL;
    return a;
error:
    a->res = NULL; /* still the caller's */
    pl_agent_free(a);
    return NULL;
}

static void outcheck_cb(uv_timer_t *h)
{
    pl_agent_check_output(h->data);
}

/* Before we register: the processes a dead agent of this pilot left
 * here (kill -9 of it) are killed, or pilotd, which runs their tasks
 * again, would have two copies running (issue 12). */
static void kill_leftovers(struct pl_agent *a)
{
    unsigned killed, tasks;
    int left;

    if (a->bench)
        return;
    left = pl_leftovers_kill(a->owner, LEFTOVER_WAIT, &killed, &tasks);
    if (killed)
        pl_log(LOG_WARNING, "killed %u processes of %u tasks that a dead "
               "agent of this pilot left on this node", killed, tasks);
    if (left)
        pl_log(LOG_ERR, "%d processes of a dead agent's tasks still run "
               "after SIGKILL and %.0f s", left, (double)LEFTOVER_WAIT);
}

int pl_agent_start(struct pl_agent *a, struct pl_error *errp)
{
    uint32_t ncores;

    /* the task processes whose parent dies come to us, not to init: we
     * reap them (sigchld_cb) */
    if (!a->bench && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        pl_log(LOG_WARNING, "PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
    kill_leftovers(a);
    if (!a->bench)
        uv_timer_start(&a->outcheck, outcheck_cb, OUTPUT_CHECK_MS,
                       OUTPUT_CHECK_MS);
    gpu_sample_start(a);
    if (pl_agent_link_connect(a, errp) < 0)
        return -1;
    (void)pl_resources_cores(a->res, &ncores);
    pl_log(LOG_NOTICE, "started: pid %d, %u cores, %zu gpus, pilotd at %s",
           (int)getpid(), ncores, pl_resources_ngpus(a->res), a->endpoint);
    pl_agent_link_up(a);
    return 0;
}

static void walk_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    pl_log(LOG_ERR, "handle still open: %s%s", uv_handle_type_name(h->type),
           uv_is_closing(h) ? " (closing)" : "");
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void pl_agent_free(struct pl_agent *a)
{
    if (!a)
        return;
    int saved = errno;
    int rc;

    pl_agent_free_tasks(a);
    pl_wpool_close(a->wpool);
    pl_pyw_close(a->pyw);
    a->pyw = NULL;
    pl_vet_close(a->vet); /* freed by its last close callback */
    a->vet = NULL;
    pl_gpusample_free(a->gsample);
    a->gsample = NULL;
    a->wpool = NULL;
    pl_agent_link_close(a);
    close_handle((uv_handle_t *)&a->flush);
    close_handle((uv_handle_t *)&a->reg);
    close_handle((uv_handle_t *)&a->heartbeat);
    close_handle((uv_handle_t *)&a->deadline);
    close_handle((uv_handle_t *)&a->watch);
    close_handle((uv_handle_t *)&a->outcheck);
    close_handle((uv_handle_t *)&a->got);
    if (a->sigchld_ok)
        close_handle((uv_handle_t *)&a->sigchld);
    /* Close callbacks run at the end of one iteration; a few are plenty. */
    for (int i = 0; i < 8 && uv_run(&a->loop, UV_RUN_NOWAIT); i++)
        ;
    if ((rc = uv_loop_close(&a->loop)) < 0) {
        pl_log(LOG_ERR, "uv_loop_close: %s", uv_strerror(rc));
        uv_walk(&a->loop, walk_cb, NULL);
    }
    pl_agent_link_free(a); /* lingers to deliver the last EVENTS */
    if (a->devnull >= 0)
        close(a->devnull);
    pl_outdir_close(&a->outdir);
    pl_bind_cuda_free(a->cuda);
    pl_bind_cpu_free(a->cpu);
    pl_env_cache_free(a->envcache);
    pl_prefetch_free(a->pref);
    pl_env_free(a->base_env);
    pl_resources_free(a->res);
    explicit_bzero(&a->keys, sizeof(a->keys));
    free(a);
    errno = saved;
}
