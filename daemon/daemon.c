/* daemon/daemon.c - pilotd's life: set-up, the batch's end, the tick, the
 * drain and the stop
 *
 * All work happens on the loop thread.  Messages are handled in bounded
 * batches (agents.c, clients.c); after each batch pl_daemon_flush()
 * runs the scheduler, commits the one open transaction (group commit),
 * and only then sends the replies and the work queued during the batch,
 * so an acknowledged submission is always committed.  When the commit
 * fails (the state directory is full or read-only) pilotd keeps going
 * on its journal without acknowledging or starting anything, and
 * retries (store.c, docs/state.md).
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "daemon/auth.h"
#include "daemon/child.h"
#include "daemon/daemon_private.h"
#include "daemon/metrics.h"
#include "daemon/slurmjob.h"
#include "proto/log.h"
#include "proto/strv.h"
#include "proto/zsock.h"
#include "proto/zwatch.h"

#define STOP_GRACE 15000       /* ms to wait for agents at shutdown */
/* Lines about what a peer sent wrong: at most BAD_LOG_BURST in each
 * BAD_LOG_WINDOW, then one line says how many were left out.  A peer
 * sending garbage as fast as it can would otherwise write a line per
 * frame (10,000 frames a second is about 1 MB of log a second). */
#define BAD_LOG_BURST 20
#define BAD_LOG_WINDOW 10.0    /* s */
/* A batch of messages ends after PL_ZBATCH of them or BATCH_NS of work:
 * pl_daemon_flush() sends the batch's replies only at its end, and a
 * peer's run of slow but valid requests (4 Mi values to decode, 100,000
 * ids to look up: 0.3-0.7 s each) held another client's status reply
 * for as long as all of them took (7 s for 10).  Now a quick request
 * waits for at most two slow ones.  The watcher calls us again at once
 * if more is queued. */
#define BATCH_NS (20 * 1000 * 1000ULL)

/* ------------------------------------------------------------ bad input */

/* End the window of bad-input lines once it is over, saying how many it
 * left out.  Called for each such line and every second (tick_cb). */
static void bad_log_window(struct pl_daemon *d, double t)
{
    if (t - d->bad_since < BAD_LOG_WINDOW)
        return;
    if (d->bad_dropped)
        pl_log(LOG_WARNING, "%llu more bad messages suppressed in the last "
               "%.0f s", d->bad_dropped, t - d->bad_since);
    d->bad_since = t;
    d->bad_logged = 0;
    d->bad_dropped = 0;
}

void pl_daemon_bad_log(struct pl_daemon *d, int level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (level > pl_log_level)
        return;
    bad_log_window(d, pl_mono());
    if (d->bad_logged >= BAD_LOG_BURST) {
        d->bad_dropped++;
        return;
    }
    d->bad_logged++;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pl_log(level, "%s", msg);
}

/* A batch or a tick that began at 't0' (uv_hrtime()) has ended: the
 * longest is kept (make bench reads it after a million-task submit). */
void pl_daemon_batch_time(struct pl_daemon *d, uint64_t t0)
{
    double s = (double)(uv_hrtime() - t0) / 1e9;

    if (s > d->longest_batch) {
        d->longest_batch = s;
        d->longest_batch_at = pl_now();
    }
}

void pl_daemon_recv(struct pl_daemon *d, void *sock, pl_daemon_msg_f fn,
                    const char *what)
{
    uint64_t t0 = uv_hrtime();

    for (int i = 0; i < PL_ZBATCH && (i == 0 || uv_hrtime() - t0 <= BATCH_NS);
         i++) {
        zmq_msg_t rid, body;

        zmq_msg_init(&rid);
        zmq_msg_init(&body);
        if (pl_zsock_recv(sock, &rid, &body) < 0) {
            int e = errno;
            zmq_msg_close(&rid);
            zmq_msg_close(&body);
            if (e == EAGAIN)
                break;
            /* a malformed multipart message: dropped */
            if (what)
                pl_daemon_bad_log(d, LOG_WARNING, "%s: %s", what,
                                  zmq_strerror(e));
            continue;
        }
        /* who sent it: our ZAP handler's user id for its connection */
        d->peer = zmq_msg_gets(&body, "User-Id");
        fn(d, zmq_msg_data(&rid), zmq_msg_size(&rid), zmq_msg_data(&body),
           zmq_msg_size(&body));
        d->peer = NULL;
        zmq_msg_close(&rid);
        zmq_msg_close(&body);
    }
    pl_daemon_flush(d);
    pl_daemon_batch_time(d, t0);
}

/* ------------------------------------------------------------ batches */

void pl_daemon_flush(struct pl_daemon *d)
{
    pl_store_retry(d, STORE_RETRY);
    if (d->want_sched && !d->stopping && !pl_db_failed(d->db, NULL))
        pl_dispatch_schedule(d);
    bool wrote = pl_db_in_txn(d->db);
    if (wrote) {
        uint64_t t0 = uv_hrtime();
        pl_db_commit(d->db, NULL); /* a failure is kept in d->db */
        pl_metrics_commit(d, uv_hrtime() - t0, false);
    }
    bool stored = !pl_db_failed(d->db, NULL);
    if (stored) {
        d->end_seq_stored = d->end_seq; /* every end so far is stored */
        pl_dispatch_send(d);
    }
    else
        pl_store_failed(d);
    /* an acknowledged submission or cancel survives a crash of the node,
     * not only of pilotd: the WAL is synced before the ack leaves (one
     * fsync per commit that holds one, not per task; docs/state.md) */
    if (stored && wrote && !d->cfg.ack_nosync && pl_outq_acks(d)) {
        struct pl_error err;
        /* the RUNs leave once their placement is committed, before the
         * sync: the commit survives a crash of pilotd, and a crash of its
         * node ends the pilot's job, agents and all; the fsync (0.4 ms
         * and more on ext4 here) stays off the idle submit-to-start path
         * (docs/state.md).  N.B. they were queued behind the sync until
         * issue 16 found it */
        pl_outq_send_runs(d);
        uint64_t t0 = uv_hrtime();
        if (pl_db_sync(d->db, &err) < 0)
            pl_log(LOG_ERR, "%s: the commit acknowledged now may not "
                   "survive a crash of this node", err.text);
        pl_metrics_commit(d, uv_hrtime() - t0, true);
    }
    /* the ends this commit stored, pushed to their watches: no end
     * leaves before its commit */
    if (stored)
        pl_watch_flush(d);
    pl_outq_send(d, stored);
    /* after the replies: a checkpoint's two fsyncs (0.2-4 ms on ext4
     * here, every 0.25 s under a stream) held them */
    if (wrote)
        pl_store_checkpoint(d, CHECKPOINT);
}

void pl_daemon_end_time(struct pl_daemon *d)
{
    struct pl_error err;
    time_t end;

    if (d->cfg.local || d->cfg.job <= 0
        || pl_mono() - d->end_time_checked < 10)
        return;
    d->end_time_checked = pl_mono();
    if (pl_slurmjob_end_time(d->cfg.job, &end, &err) < 0)
        pl_log(LOG_WARNING, "%s", err.text);
    else
        d->end_time = end;
}

/* ------------------------------------------------------------ stopping */

static void close_cb(uv_handle_t *h)
{
    struct pl_daemon *d = h->data;

    d->handles--;
}

static void close_handles(struct pl_daemon *d)
{
    uv_close((uv_handle_t *)&d->sigterm, close_cb);
    uv_close((uv_handle_t *)&d->sigint, close_cb);
    uv_close((uv_handle_t *)&d->tick, close_cb);
    uv_close((uv_handle_t *)&d->stop_timer, close_cb);
    uv_close((uv_handle_t *)&d->restart_timer, close_cb);
    uv_close((uv_handle_t *)&d->cancel_idle, close_cb);
    uv_close((uv_handle_t *)&d->watch_idle, close_cb);
    pl_metrics_stop(d);
}

/* A task whose agent did not report in time ends, or with the drain
 * waits for the next allocation. */
static void stop_task_cb(struct pl_dtask *t, void *arg)
{
    struct pl_daemon *d = arg;

    if (t->state != PL_ST_ASSIGNED && t->state != PL_ST_RUNNING)
        return;
    /* held by its agent beyond its free cores (--prefetch) and never
     * started: as a queued task, it stays queued for 'pilot up
     * --resume'.  N.B. an agent that started it sent its 'running'
     * before it exited, unless it did not exit in time. */
    if (pl_dtask_held(t) && !t->cancel) {
        pl_dtask_requeue(d, t, d->draining
                                   ? "walltime drain " PL_REASON_UNSTARTED
                                   : "pilot down " PL_REASON_UNSTARTED,
                         true);
        return;
    }
    if (d->draining && !t->cancel) {
        pl_dtask_requeue(d, t, "interrupted by the walltime drain", true);
        return;
    }
    pl_dtask_end(d, t, PL_ST_CANCELED, "pilot down");
}

static void finish_stop(struct pl_daemon *d)
{
    struct pl_error err;

    if (d->stopped)
        return;
    d->stopped = true;
    pl_sched_node_tasks(d->sched, NULL, stop_task_cb, d);
    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++)
        pl_agents_record(d, pl_sched_node_at(d->sched, k), "down");
    pl_alloc_stop(d);
    if (pl_db_commit(d->db, &err) < 0)
        pl_log(LOG_ERR, "final commit: %s: %zu changes are lost",
               err.text, pl_db_unstored(d->db));
    pl_daemon_flush(d);
    pl_endpoint_remove(d->dir);
    pl_zwatch_free(d->czw);
    pl_zwatch_free(d->azw);
    d->czw = d->azw = NULL;
    pl_auth_stop(d->auth);
    close_handles(d);
    pl_launch_free_all(d);
    pl_log(LOG_NOTICE, "pilot %s stopped", d->id);
}

static void stop_timer_cb(uv_timer_t *h)
{
    struct pl_daemon *d = h->data;

    if (pl_launch_running(d))
        pl_log(LOG_WARNING, "agents did not finish within %d s; stopping "
               "anyway", STOP_GRACE / 1000);
    finish_stop(d);
}

/* Whether nothing is left to wait for: the agents' process ended and no
 * task is on an agent. */
static bool all_ended(const struct pl_daemon *d)
{
    return !pl_launch_running(d)
           && d->count[PL_ST_ASSIGNED] + d->count[PL_ST_RUNNING] == 0;
}

void pl_daemon_stop(struct pl_daemon *d, const char *why)
{
    if (d->stopping) {
        if (!why) {
            /* the agents' process ended: nothing to wait for */
            uv_timer_stop(&d->stop_timer);
            uv_timer_start(&d->stop_timer, stop_timer_cb, 0, 0);
        }
        return;
    }
    d->stopping = true;
    pl_log(LOG_NOTICE, "pilot %s stopping: %s", d->id, why ? why : "");
    uv_timer_stop(&d->restart_timer);
    pl_agents_exit(d);
    pl_vet_stop(d);
    pl_daemon_flush(d);
    uv_timer_start(&d->stop_timer, stop_timer_cb,
                   all_ended(d) ? 0 : STOP_GRACE, 0);
}

static void signal_cb(uv_signal_t *h, int signum)
{
    struct pl_daemon *d = h->data;

    /* Slurm's signal before the walltime (or scancel): keep the work */
    d->draining = true;
    pl_daemon_stop(d, signum == SIGTERM ? "SIGTERM: draining, interrupted "
                                          "tasks stay queued"
                                        : "SIGINT: draining");
}

static void tick_cb(uv_timer_t *h)
{
    struct pl_daemon *d = h->data;
    uint64_t t0 = uv_hrtime();

    pl_daemon_end_time(d);
    if (d->end_time > 0) {
        double left = (double)d->end_time - pl_now() - d->cfg.drain_before;
        pl_sched_set_time_left(d->sched, left > 1 ? left : 1);
    }
    if (d->stopping && !d->stopped && all_ended(d)) {
        /* agents of an earlier pilotd: their tasks have ended */
        uv_timer_stop(&d->stop_timer);
        uv_timer_start(&d->stop_timer, stop_timer_cb, 0, 0);
    }
    if (d->recovering
        && (pl_mono() >= d->recover_until
            || (int)pl_sched_nnodes(d->sched) >= d->cfg.expected_agents))
        pl_recover_end(d);
    bad_log_window(d, pl_mono());
    pl_agents_tick(d);
    pl_orders_tick(d);
    pl_watch_tick(d);
    pl_vet_tick(d);
    pl_alloc_tick(d);
    pl_daemon_flush(d);
    pl_store_checkpoint(d, 0); /* the last writes of a burst */
    pl_daemon_batch_time(d, t0);
}

/* ------------------------------------------------------------ set-up */

/* Bind 'sock' to 'ep' if it holds an address (the one the pilotd before
 * us had, on this host), else to any port of 'addr'; 'ep' gets it. */
static int bind_again(void *sock, const char *addr, char *ep, size_t eplen,
                      struct pl_error *errp)
{
    if (ep[0] && zmq_bind(sock, ep) == 0)
        return 0;
    if (ep[0])
        pl_log(LOG_WARNING, "cannot bind %s again (%s): agents will find the "
               "new port in the endpoint file", ep, zmq_strerror(errno));
    return pl_zsock_bind_any(sock, addr, ep, eplen, errp);
}

/* The sockets: the ZAP handler first (a CURVE server without one admits
 * anyone), both ROUTERs bound, and their watchers. */
static int sockets_open(struct pl_daemon *d, struct pl_error *errp)
{
    if (!(d->zctx = zmq_ctx_new()))
        return pl_errprintf(errp, "zmq_ctx_new: %s", zmq_strerror(errno));
    /* two I/O threads: the CURVE handshakes of 1,000 agents registering
     * at once, and every message's encryption, on two cores (each
     * connection stays on one of them) */
    (void)zmq_ctx_set(d->zctx, ZMQ_IO_THREADS, 2);
    if (!(d->auth = pl_auth_new(d->loop, d->zctx, d->keydir, errp))
        || !(d->csock = pl_zsock_new(d->zctx, ZMQ_ROUTER, errp))
        || !(d->asock = pl_zsock_new(d->zctx, ZMQ_ROUTER, errp))
        || pl_auth_server(d->auth, d->csock, "clients",
                          1u << PL_ROLE_ADMIN | 1u << PL_ROLE_SUBMIT
                              | 1u << PL_ROLE_READ, errp) < 0
        || pl_auth_server(d->auth, d->asock, "agents", 1u << PL_ROLE_AGENT,
                          errp) < 0
        || bind_again(d->csock, d->cfg.bind_addr, d->cep, sizeof(d->cep),
                      errp) < 0
        || bind_again(d->asock, d->cfg.bind_addr, d->aep, sizeof(d->aep),
                      errp) < 0)
        return -1;
    if (!(d->czw = pl_zwatch_new(d->loop, d->csock, ZMQ_POLLIN,
                                 pl_clients_cb, d))
        || !(d->azw = pl_zwatch_new(d->loop, d->asock, ZMQ_POLLIN,
                                    pl_agents_cb, d))
        || pl_zwatch_start(d->czw) < 0 || pl_zwatch_start(d->azw) < 0)
        return pl_errprintf(errp, "watch sockets: %s", strerror(errno));
    return 0;
}

struct pl_daemon *pl_daemon_new(uv_loop_t *loop,
                                const struct pl_daemon_config *cfg,
                                struct pl_error *errp)
{
    struct pl_daemon *d;
    char dbpath[PL_PATH_MAX + 16];
    struct pl_endpoint ep = { 0 };

    if (!(d = calloc(1, sizeof(*d)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    d->loop = loop;
    d->cfg = *cfg;
    snprintf(d->dir, sizeof(d->dir), "%s", cfg->dir);
    snprintf(d->keydir, sizeof(d->keydir), "%s", cfg->keydir);
    snprintf(d->id, sizeof(d->id), "%s", cfg->id);
    snprintf(d->bindir, sizeof(d->bindir), "%s", cfg->bindir);
    d->cfg.dir = d->dir;
    d->cfg.keydir = d->keydir;
    d->cfg.id = d->id;
    d->cfg.bindir = d->bindir;
    d->outtail = &d->outq;
    d->started = pl_now();
    snprintf(d->instance, sizeof(d->instance), "%s/%ld/%.6f", cfg->id,
             (long)getpid(), d->started);
    gethostname(d->host, sizeof(d->host));
    d->host[sizeof(d->host) - 1] = '\0';

    uv_signal_init(loop, &d->sigterm);
    uv_signal_init(loop, &d->sigint);
    uv_timer_init(loop, &d->tick);
    uv_timer_init(loop, &d->stop_timer);
    uv_timer_init(loop, &d->restart_timer);
    uv_idle_init(loop, &d->cancel_idle);
    uv_idle_init(loop, &d->watch_idle);
    d->sigterm.data = d->sigint.data = d->tick.data = d->stop_timer.data =
        d->restart_timer.data = d->cancel_idle.data = d->watch_idle.data = d;
    d->handles = 7;

    pl_path_db(d->dir, dbpath, sizeof(dbpath));
    if (!(d->db = pl_db_open(dbpath, errp))
        || pl_submit_py_defaults(d, errp) < 0)
        goto error;
    if (!(d->sched = pl_sched_new())) {
        pl_errprintf(errp, "out of memory");
        goto error;
    }
    pl_sched_set_prefetch(d->sched, d->cfg.prefetch);
    if (pl_recover_load(d, errp) < 0 || pl_alloc_boot(d, errp) < 0
        || pl_vet_boot(d, errp) < 0
        || pl_poolctl_boot(d, errp) < 0
        || sockets_open(d, errp) < 0 || pl_metrics_start(d, errp) < 0)
        goto error;
    uv_signal_start(&d->sigterm, signal_cb, SIGTERM);
    uv_signal_start(&d->sigint, signal_cb, SIGINT);
    uv_timer_start(&d->tick, tick_cb, 1000, 1000);
    d->tick_at = pl_mono(); /* a stall before the first tick is one too */
    pl_daemon_end_time(d);
    if (!d->agents_deferred && pl_launch_agents(d, NULL, 0, errp) < 0)
        goto error;
    snprintf(ep.client, sizeof(ep.client), "%s", d->cep);
    snprintf(ep.agent, sizeof(ep.agent), "%s", d->aep);
    snprintf(ep.host, sizeof(ep.host), "%s", d->host);
    ep.pid = (long)getpid();
    ep.job = cfg->job;
    if (pl_endpoint_write(d->dir, &ep, errp) < 0)
        goto error;
    pl_log(LOG_NOTICE, "pilot %s up: clients %s, agents %s, %lld tasks "
           "(%zu queued), expecting %d agents", d->id, d->cep, d->aep,
           d->total, pl_sched_queued(d->sched), cfg->expected_agents);
    return d;
error:
    pl_launch_free_all(d);
    d->stopping = d->stopped = true;
    pl_zwatch_free(d->czw);
    pl_zwatch_free(d->azw);
    d->czw = d->azw = NULL;
    pl_auth_stop(d->auth);
    close_handles(d);
    uv_run(loop, UV_RUN_DEFAULT);
    pl_daemon_free(d);
    return NULL;
}

int pl_daemon_exit_code(const struct pl_daemon *d)
{
    return d->stopped ? 0 : 1;
}

void pl_daemon_free(struct pl_daemon *d)
{
    if (!d)
        return;
    int saved = errno;
    pl_outq_free(d);
    if (d->csock)
        zmq_close(d->csock);
    if (d->asock)
        zmq_close(d->asock);
    pl_auth_free(d->auth); /* N.B. after the sockets it guards */
    if (d->zctx)
        zmq_ctx_term(d->zctx);
    pl_agents_free(d);
    pl_poolctl_free(d);
    pl_vet_free(d);
    pl_alloc_free(d);
    pl_orders_free_all(d);
    pl_cancel_free_all(d);
    pl_watch_free_all(d); /* before the tasks it points to */
    pl_metrics_free(d);
    pl_sched_free(d->sched);
    pl_db_close(d->db);
    free(d->py_prelude);
    free(d->py_python);
    free(d->unsent);
    free(d->depfail);
    free(d);
    errno = saved;
}
