/* agent/link.c - the agent's link to pilotd: what it sends, and when
 *
 * One DEALER to pilotd, a CURVE client, watched by pl_zwatch on the
 * agent's loop.  REGISTER goes again every REGISTER_MS until WELCOME;
 * then HEARTBEAT at the period WELCOME gave (a period after we last sent
 * anything, or after pilotd last said anything: it answers with a PING),
 * and
 * PULL when cores are
 * free and we have not pulled since the last RUN.  The events of a loop
 * iteration leave as one EVENTS message (from agent.c's flush timer);
 * an end stays in 'unacked' until pilotd has committed it (its ACK, or
 * the WELCOME to a REGISTER that carried it), and goes again after
 * RESEND_S.  A message that finds the socket full waits in a queue that
 * POLLOUT drains, so that messages leave in order.  When pilotd is
 * silent we read its endpoint file again (it may have restarted
 * elsewhere), and a monitor says why CURVE handshakes fail.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "agent/agent_private.h"
#include "agent/pool.h"
#include "agent/prefetch.h"
#include "agent/pyw.h"
#include "proto/log.h"
#include "proto/vetmsg.h"
#include "proto/state.h"
#include "proto/strv.h"
#include "proto/zsock.h"

#define REGISTER_MS 2000     /* REGISTER again until WELCOME */
#define RESEND_S 10.0        /* an end not acknowledged this long goes again */
#define WATCH_MS 1000        /* how often we check that pilotd is there */
#define REREAD_S 6.0         /* silent pilotd: read its endpoint file again */
#define HANDSHAKE_LOG_MS 60000 /* between two handshake failure lines */
#define GOT_MS 500           /* between two GOTs (pilotd resends after 5 s) */

/* A message that got EAGAIN, sent again on POLLOUT. */
struct outmsg {
    struct outmsg *next;
    char *data;        /* malloc()ed, as msgpack_sbuffer_release() gives */
    size_t size;
};

/* An end that pilotd has not committed yet. */
struct unacked {
    struct pl_event ev; /* its error owned */
    uint64_t seq;       /* the EVENTS message that last carried it */
    double sent;        /* when (pl_agent_now()) */
};

/* ---- sending ---- */

static void want_pollout(struct pl_agent *a, bool on)
{
    pl_zwatch_set_events(a->zw, on ? ZMQ_POLLIN | ZMQ_POLLOUT : ZMQ_POLLIN);
}

/* Send the message built in 'w' (destroyed here), or queue it if the
 * socket would block: messages leave in order. */
static void send_wbuf(struct pl_agent *a, struct pl_wbuf *w, int type)
{
    struct outmsg *m;

    /* sent, queued or dropped: pilotd hears us, or the socket is
     * broken and a HEARTBEAT would not help */
    a->spoke = pl_agent_now(a);
    if (!a->outq
        && pl_zsock_send(a->zsock, NULL, 0, w->sb.data, w->sb.size) == 0) {
        pl_log(LOG_DEBUG, "sent %s (%zu bytes)", pl_msg_type_name(type),
               w->sb.size);
        pl_wbuf_destroy(w);
        return;
    }
    if (a->outq || errno == EAGAIN || errno == EINTR) {
        if (!(m = calloc(1, sizeof(*m)))) {
            pl_log(LOG_WARNING, "%s dropped: out of memory",
                   pl_msg_type_name(type));
            pl_wbuf_destroy(w);
            return;
        }
        m->size = w->sb.size;
        m->data = msgpack_sbuffer_release(&w->sb);
        *a->outq_tail = m;
        a->outq_tail = &m->next;
        a->noutq++;
        want_pollout(a, true);
        pl_log(LOG_DEBUG, "%s queued (%zu waiting)", pl_msg_type_name(type),
               a->noutq);
        return;
    }
    pl_log(LOG_WARNING, "send %s: %s", pl_msg_type_name(type),
           zmq_strerror(errno));
    pl_wbuf_destroy(w);
}

/* Send what waits in the queue, until the socket would block again. */
static void drain_outq(struct pl_agent *a)
{
    struct outmsg *m;

    while ((m = a->outq)) {
        if (pl_zsock_send(a->zsock, NULL, 0, m->data, m->size) < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            pl_log(LOG_WARNING, "send: %s", zmq_strerror(errno));
        }
        a->outq = m->next;
        if (!a->outq)
            a->outq_tail = &a->outq;
        a->noutq--;
        free(m->data);
        free(m);
    }
    want_pollout(a, false);
}

/* REGISTER: who we are, what runs here, and every end pilotd has not
 * committed (a restarted pilotd never got them). */
static void send_register(struct pl_agent *a)
{
    struct pl_register r = { 0 };
    struct pl_wbuf w;

    /* N.B. the encoder borrows every pointer: the casts drop only const */
    r.node = (char *)pl_resources_node(a->res);
    r.pid = (uint64_t)getpid();
    r.cpu = (uint64_t *)pl_resources_cores(a->res, &r.ncpu);
    r.gpus = (char **)pl_resources_gpu_ids(a->res);
    r.last_run = a->last_run;
    /* the job this agent runs in: pilotd tells a grown allocation's
     * nodes by it, and drains them before its end (docs/grow.md) */
    const char *job = getenv("SLURM_JOB_ID"), *end = getenv("PILOT_JOB_END");
    r.job = job ? strtoull(job, NULL, 10) : 0;
    r.job_end = end ? strtod(end, NULL) : 0;
    if (r.job > UINT32_MAX || !(r.job_end >= 0 && r.job_end < 1e11))
        r.job = 0, r.job_end = 0;
    size_t npool = pl_wpool_held(a->wpool, NULL, 0);
    size_t npy = pl_pyw_held(a->pyw, NULL, 0);
    r.running = calloc(a->nrunning + npool + npy + 1, sizeof(*r.running));
    r.ended = calloc(a->nunacked + 1, sizeof(*r.ended));
    if (!r.running || !r.ended) {
        /* the reg timer tries again while we are not welcomed */
        pl_log(LOG_WARNING, "%s dropped: out of memory",
               pl_msg_type_name(PL_MSG_REGISTER));
        goto done;
    }
    for (size_t i = 0; i < a->nrunning; i++) {
        const struct pl_run *e = pl_task_entry(a->running[i]);
        r.running[i] = (struct pl_held){ .id = e->id, .attempt = e->attempt,
                                         .rank = e->rank };
        /* started from the prefetched ones: its cores, in case its
         * 'running' never reached pilotd */
        if (e->prefetch) {
            r.running[i].cores = e->cores;
            r.running[i].ncores = e->ncores;
        }
    }
    r.nrunning = (uint32_t)a->nrunning;
    /* a pool task's ranks run in their workers */
    r.nrunning += (uint32_t)pl_wpool_held(a->wpool, r.running + a->nrunning,
                                          npool);
    /* and a Python call's in its warm worker */
    r.nrunning += (uint32_t)pl_pyw_held(a->pyw, r.running + r.nrunning, npy);
    for (size_t i = 0; i < a->nunacked; i++)
        r.ended[i] = a->unacked[i].ev; /* a shallow copy: borrowed */
    r.nended = (uint32_t)a->nunacked;
    pl_register_encode(&w, a->seq++, &r);
    send_wbuf(a, &w, PL_MSG_REGISTER);
done:
    free(r.running);
    free(r.ended);
}

void pl_agent_pool_ready_send(struct pl_agent *a,
                              const struct pl_pool_ready *pr)
{
    struct pl_wbuf w;

    pl_pool_ready_encode(&w, a->seq++, pr);
    send_wbuf(a, &w, PL_MSG_POOL_READY);
}

void pl_agent_vet_result_send(struct pl_agent *a,
                              const struct pl_vet_result *r)
{
    struct pl_wbuf w;

    pl_vet_result_encode(&w, a->seq++, r);
    send_wbuf(a, &w, PL_MSG_VET_RESULT);
}

static void send_pull(struct pl_agent *a)
{
    struct pl_pull p = {
        .free_cores = pl_resources_free_cores(a->res),
        .free_gpus = pl_resources_free_gpus(a->res),
    };
    struct pl_wbuf w;

    pl_pull_encode(&w, a->seq++, &p);
    send_wbuf(a, &w, PL_MSG_PULL);
    a->pulled = true;
}

void pl_agent_pull(struct pl_agent *a)
{
    bool freed = a->end_freed;

    a->end_freed = false;
    if (!a->welcomed || a->pulled || a->exiting
        || pl_resources_free_cores(a->res) == 0)
        return;
    /* the end that went before it frees the cores in pilotd, which then
     * schedules them: as good as a PULL, one message less a task */
    if (freed)
        a->pulled = true;
    else
        send_pull(a);
}

/* ---- events, and the ends pilotd has not committed ---- */

struct pl_event *pl_agent_event_add(struct pl_agent *a, uint64_t id,
                                    uint64_t attempt, uint64_t rank,
                                    int state)
{
    struct pl_event *e;

    if (pl_grow(&a->events, &a->cap_events, a->nevents, 1, sizeof(*e)) < 0) {
        pl_log(LOG_WARNING, "task %llu: event '%s' lost: out of memory",
               (unsigned long long)id, pl_state_name(state));
        return NULL;
    }
    if (a->nevents == 0)
        a->events_ms = uv_now(&a->loop);
    e = &a->events[a->nevents++];
    pl_event_init(e, id, attempt, rank, state, pl_now());
    /* a start may wait for the end that often follows it at once */
    if (state == PL_ST_RUNNING)
        pl_agent_kick_soon(a);
    else
        pl_agent_kick(a);
    return e;
}

/* Keep the end 'e' (its error taken over) until pilotd acknowledges the
 * EVENTS message 'seq'.  Out of memory, it is only sent once. */
static void keep_unacked(struct pl_agent *a, struct pl_event *e, uint64_t seq)
{
    if (pl_grow(&a->unacked, &a->cap_unacked, a->nunacked, 1,
                sizeof(*a->unacked)) < 0) {
        pl_log(LOG_WARNING, "task %llu: cannot keep its end until pilotd "
               "commits it: out of memory", (unsigned long long)e->id);
        pl_event_clear(e);
        return;
    }
    a->unacked[a->nunacked++] = (struct unacked){
        .ev = *e, .seq = seq, .sent = pl_agent_now(a)
    };
}

/* The events of one EVENTS message hold at most this many bytes of
 * Python results (64 KiB each at most): a frame stays far below what
 * pilotd's socket takes (PL_MSG_MAX), however many calls ended at once. */
#define EVENTS_RESULT_BYTES (4 * 1024 * 1024)

void pl_agent_events_send(struct pl_agent *a)
{
    struct pl_wbuf w;
    uint64_t seq;

    for (size_t i = 0, n; i < a->nevents; i += n) {
        size_t bytes = 0;
        for (n = 0; i + n < a->nevents; n++) {
            bytes += a->events[i + n].nresult;
            if (n > 0 && bytes > EVENTS_RESULT_BYTES)
                break;
        }
        seq = a->seq++;
        pl_events_begin(&w, seq, (uint32_t)n);
        for (size_t k = i; k < i + n; k++) {
            struct pl_event *e = &a->events[k];
            pl_event_encode(&w, e);
            if (pl_state_final(e->state))
                keep_unacked(a, e, seq);
            else
                pl_event_clear(e);
        }
        send_wbuf(a, &w, PL_MSG_EVENTS);
    }
    a->nevents = 0;
}

bool pl_agent_ended(const struct pl_agent *a, uint64_t id, uint64_t attempt,
                    uint64_t rank)
{
    for (size_t i = 0; i < a->nevents; i++) {
        const struct pl_event *e = &a->events[i];
        if (e->id == id && e->attempt == attempt && e->rank == rank
            && pl_state_final(e->state))
            return true;
    }
    for (size_t i = 0; i < a->nunacked; i++) {
        const struct pl_event *e = &a->unacked[i].ev;
        if (e->id == id && e->attempt == attempt && e->rank == rank)
            return true;
    }
    return false;
}

static void got_cb(uv_timer_t *h)
{
    pl_agent_got_send(h->data);
}

void pl_agent_got_send(struct pl_agent *a)
{
    struct pl_wbuf w;
    uint64_t now = uv_now(&a->loop);

    if (!a->got_due || !a->welcomed)
        return;
    if (a->got_ms && now - a->got_ms < GOT_MS) {
        /* one GOT says it for every RUN read until then */
        if (!uv_is_active((uv_handle_t *)&a->got))
            uv_timer_start(&a->got, got_cb, a->got_ms + GOT_MS - now, 0);
        return;
    }
    uv_timer_stop(&a->got);
    a->got_ms = now ? now : 1;
    a->got_due = false;
    pl_got_encode(&w, a->seq++, a->last_run);
    send_wbuf(a, &w, PL_MSG_GOT);
}

/* Send again, in one EVENTS message, the ends pilotd has not acknowledged
 * for RESEND_S (its commit failed, or the message was lost with it). */
static void resend_unacked(struct pl_agent *a)
{
    struct pl_wbuf w;
    double t = pl_agent_now(a);
    uint32_t n = 0;
    uint64_t seq;

    for (size_t i = 0; i < a->nunacked; i++)
        n += t - a->unacked[i].sent >= RESEND_S;
    if (n == 0 || !a->welcomed)
        return;
    seq = a->seq++;
    pl_events_begin(&w, seq, n);
    for (size_t i = 0; i < a->nunacked; i++) {
        struct unacked *u = &a->unacked[i];
        if (t - u->sent < RESEND_S)
            continue;
        pl_event_encode(&w, &u->ev);
        u->seq = seq;
        u->sent = t;
    }
    pl_log(LOG_NOTICE, "sending %u task ends again: pilotd has not "
           "committed them", n);
    send_wbuf(a, &w, PL_MSG_EVENTS);
}

/* Forget the ends that travelled in message 'seq' ('below': in any
 * message before it): pilotd committed them. */
static void drop_unacked(struct pl_agent *a, uint64_t seq, bool below)
{
    size_t k = 0;

    for (size_t i = 0; i < a->nunacked; i++) {
        struct unacked *u = &a->unacked[i];
        if (below ? u->seq < seq : u->seq == seq)
            pl_event_clear(&u->ev);
        else
            a->unacked[k++] = *u;
    }
    a->nunacked = k;
}

/* ---- registering, heartbeats ---- */

/* Any message is a sign of life to pilotd: a HEARTBEAT only when a
 * period has passed since we last sent anything or since pilotd last
 * said anything (its PING answers it), so that 1,000 busy agents send
 * none and idle ones one a period (issue 16).  Else the timer waits
 * until a period after the older of the two: no gap is longer than a
 * period, which --lost-after may be as little as (t0850). */
static void heartbeat_cb(uv_timer_t *h)
{
    struct pl_agent *a = h->data;
    uint64_t repeat = uv_timer_get_repeat(h);
    double now = pl_agent_now(a), period = (double)repeat / 1000.0;
    double older = a->spoke < a->heard ? a->spoke : a->heard;
    struct pl_wbuf w;

    if (now - older < period) {
        uint64_t ms = (uint64_t)ceil((older + period - now) * 1000.0);
        uv_timer_start(h, heartbeat_cb, ms ? ms : 1, repeat);
    }
    else {
        pl_bare_encode(&w, PL_MSG_HEARTBEAT, a->seq++);
        send_wbuf(a, &w, PL_MSG_HEARTBEAT);
    }
    resend_unacked(a);
}

static void reg_cb(uv_timer_t *h)
{
    struct pl_agent *a = h->data;

    pl_log(LOG_DEBUG, "no welcome yet: register again");
    send_register(a);
}

/* Leave the welcomed state and REGISTER until a WELCOME comes. */
static void register_again(struct pl_agent *a)
{
    a->welcomed = false;
    uv_timer_stop(&a->heartbeat);
    send_register(a);
    uv_timer_start(&a->reg, reg_cb, REGISTER_MS, REGISTER_MS);
}

int pl_agent_welcome_cb(struct pl_agent *a, const struct pl_msg *m,
                        struct pl_error *errp)
{
    struct pl_welcome wl;

    if (pl_welcome_decode(m->body, &wl, errp) < 0)
        return -1;
    if (strcmp(wl.node, a->node)) {
        pl_log(LOG_NOTICE, "pilotd calls this node %s", wl.node);
        snprintf(a->node, sizeof(a->node), "%s", wl.node);
        pl_log_init("pilot-agent", a->node, NULL);
    }
    uint64_t ms = (uint64_t)ceil(wl.heartbeat * 1000.0);
    /* another pilotd numbers its RUNs from 1 */
    if (strcmp(wl.instance, a->instance)) {
        if (a->instance[0])
            pl_log(LOG_NOTICE, "a new pilotd (%s) took over", wl.instance);
        snprintf(a->instance, sizeof(a->instance), "%s", wl.instance);
        a->last_run = 0;
        /* the new one queued again what the old one prefetched here */
        if (pl_prefetch_len(a->pref))
            pl_log(LOG_NOTICE, "%zu prefetched tasks dropped: the new "
                   "pilotd runs them", pl_prefetch_len(a->pref));
        pl_prefetch_clear(a->pref);
    }
    /* the welcome answers register m->seq, which carried every end sent
     * before it: pilotd committed them before it answered */
    drop_unacked(a, m->seq, true);
    uv_timer_stop(&a->reg);
    uv_timer_start(&a->heartbeat, heartbeat_cb, ms, ms);
    pl_log(LOG_NOTICE, "registered (heartbeat %.3g s, %zu cores, %zu gpus)",
           wl.heartbeat, pl_resources_free_cores(a->res),
           pl_resources_free_gpus(a->res));
    a->welcomed = true;
    a->pulled = false; /* a new (or restarted) pilotd: ask again */
    pl_wpool_report(a->wpool, true);
    pl_agent_kick(a);
    pl_welcome_clear(&wl);
    return 0;
}

int pl_agent_ack_cb(struct pl_agent *a, const struct pl_msg *m,
                    struct pl_error *errp)
{
    uint64_t seq;

    if (pl_ack_decode(m->body, &seq, errp) < 0)
        return -1;
    drop_unacked(a, seq, false);
    return 0;
}

/* A pilotd that does not know us (it restarted): register again, with
 * what runs here and what ended meanwhile. */
int pl_agent_reregister_cb(struct pl_agent *a, const struct pl_msg *m,
                           struct pl_error *errp)
{
    (void)m;
    (void)errp;
    /* N.B. not while registering: pilotd asks once per message it got
     * from us before our REGISTER, and the reg timer repeats it anyway */
    if (a->exiting || !a->welcomed)
        return 0;
    pl_log(LOG_NOTICE, "pilotd does not know us (restarted?): registering "
           "again with %zu running, %zu ended", a->nrunning, a->nunacked);
    register_again(a);
    return 0;
}

/* ---- the socket ---- */

static void zsock_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct pl_agent *a = arg;

    (void)zw;
    if (revents & ZMQ_POLLOUT)
        drain_outq(a);
    if (!(revents & ZMQ_POLLIN))
        return;
    for (int i = 0; i < PL_ZBATCH; i++) {
        zmq_msg_t body;
        zmq_msg_init(&body);
        if (pl_zsock_recv(a->zsock, NULL, &body) < 0) {
            int e = errno;
            zmq_msg_close(&body);
            if (e == EAGAIN || e == EINTR)
                break;
            pl_log(LOG_WARNING, "recv: %s", zmq_strerror(e));
            continue;
        }
        pl_agent_dispatch(a, zmq_msg_data(&body), zmq_msg_size(&body));
        zmq_msg_close(&body);
    }
}

/* The CURVE handshake, as the socket's monitor reports it. */
static void mon_cb(struct pl_zmon *m, int event, uint32_t value, void *arg)
{
    struct pl_agent *a = arg;
    uint64_t now = uv_now(&a->loop);
    (void)m;

    switch (event) {
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        pl_log(LOG_DEBUG, "CURVE handshake with pilotd done");
        break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        /* ZAP said no: a key not in the pilot's allow-list stays out,
         * so waiting is no use (pilotd keeps its allow-list) */
        if (a->exiting || a->finished)
            break;
        pl_log(LOG_ERR, "pilotd at %s refused our key %s/%s.key (ZAP "
               "status %u): it is not in the pilot's allow-list",
               a->endpoint, a->keys.dir, a->keys.name, (unsigned)value);
        a->exit_code = 1;
        pl_agent_shutdown(a, "pilotd refused our key");
        break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        /* pilotd broke off: another server key, or pilotd going away;
         * ZeroMQ retries, we say so now and then */
        if (a->handshake_log_ms && now - a->handshake_log_ms
                                       < HANDSHAKE_LOG_MS)
            break;
        a->handshake_log_ms = now ? now : 1;
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
            pl_log(LOG_WARNING, "CURVE handshake with pilotd at %s failed "
                   "(protocol error %#x): is %s/server.pub this pilot's "
                   "key?", a->endpoint, (unsigned)value, a->keys.dir);
        else
            pl_log(LOG_WARNING, "CURVE handshake with pilotd at %s broken "
                   "off (%s); if this goes on, is %s/server.pub this "
                   "pilot's key?", a->endpoint, strerror((int)value),
                   a->keys.dir);
        break;
    default:
        break;
    }
}

/* ---- a pilotd that went away ---- */

/* Connect to the agent endpoint pilotd's endpoint file names, if it is
 * not the one we use: a pilotd restarted on other ports. */
static void reread_endpoint(struct pl_agent *a)
{
    struct pl_endpoint ep;
    struct pl_error err;

    a->reread = pl_agent_now(a);
    if (pl_endpoint_read(a->dir, &ep, &err) < 0) {
        pl_log(LOG_DEBUG, "endpoint file: %s", err.text);
        return;
    }
    if (!ep.agent[0] || !strcmp(ep.agent, a->endpoint))
        return;
    pl_log(LOG_NOTICE, "pilotd moved to %s (was %s): connecting there",
           ep.agent, a->endpoint);
    (void)zmq_disconnect(a->zsock, a->endpoint); /* gone either way */
    if (zmq_connect(a->zsock, ep.agent) < 0) {
        pl_log(LOG_WARNING, "connect %s: %s", ep.agent, zmq_strerror(errno));
        (void)zmq_connect(a->zsock, a->endpoint); /* it worked before */
        return;
    }
    snprintf(a->endpoint, sizeof(a->endpoint), "%s", ep.agent);
    register_again(a);
}

static void watch_cb(uv_timer_t *h)
{
    struct pl_agent *a = h->data;
    double silent = pl_agent_now(a) - a->heard;

    if (a->exiting)
        return;
    if (a->orphan_after > 0 && silent > a->orphan_after) {
        char why[96];
        snprintf(why, sizeof(why), "no word from pilotd for %.0f s", silent);
        pl_agent_shutdown(a, why);
        return;
    }
    if (a->dir[0] && silent > REREAD_S && pl_agent_now(a) - a->reread
                                              > REREAD_S)
        reread_endpoint(a);
}

/* ---- life cycle ---- */

int pl_agent_link_open(struct pl_agent *a, struct pl_error *errp)
{
    if (!(a->zctx = zmq_ctx_new()))
        return pl_errprintf(errp, "zmq_ctx_new: %s", zmq_strerror(errno));
    if (!(a->zsock = pl_zsock_new(a->zctx, ZMQ_DEALER, errp))
        || pl_zsock_curve_client(a->zsock, a->keys.server, &a->keys.own,
                                 errp) < 0
        || !(a->mon = pl_zmon_new(&a->loop, a->zctx, a->zsock,
                                  ZMQ_EVENT_HANDSHAKE_SUCCEEDED
                                      | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                                      | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                                      | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                                  mon_cb, a, errp)))
        return -1;
    if (!(a->zw = pl_zwatch_new(&a->loop, a->zsock, ZMQ_POLLIN, zsock_cb,
                                a)))
        return pl_errprintf(errp, "zwatch: %s", strerror(errno));
    return 0;
}

int pl_agent_link_connect(struct pl_agent *a, struct pl_error *errp)
{
    if (zmq_connect(a->zsock, a->endpoint) < 0)
        return pl_errprintf(errp, "connect %s: %s", a->endpoint,
                            zmq_strerror(errno));
    if (pl_zwatch_start(a->zw) < 0)
        return pl_errprintf(errp, "zwatch: %s", strerror(errno));
    return 0;
}

void pl_agent_link_up(struct pl_agent *a)
{
    a->heard = a->reread = pl_agent_now(a);
    send_register(a);
    uv_timer_start(&a->reg, reg_cb, REGISTER_MS, REGISTER_MS);
    uv_timer_start(&a->watch, watch_cb, WATCH_MS, WATCH_MS);
}

void pl_agent_link_stop(struct pl_agent *a)
{
    uv_timer_stop(&a->reg);
    uv_timer_stop(&a->heartbeat);
    uv_timer_stop(&a->watch);
    pl_zwatch_stop(a->zw);
}

void pl_agent_link_close(struct pl_agent *a)
{
    pl_zwatch_free(a->zw);
    pl_zmon_free(a->mon);
}

void pl_agent_link_free(struct pl_agent *a)
{
    if (a->zsock)
        zmq_close(a->zsock); /* lingers to deliver the last EVENTS */
    if (a->zctx)
        zmq_ctx_term(a->zctx);
    for (size_t i = 0; i < a->nevents; i++)
        pl_event_clear(&a->events[i]);
    free(a->events);
    for (size_t i = 0; i < a->nunacked; i++)
        pl_event_clear(&a->unacked[i].ev);
    free(a->unacked);
    while (a->outq) {
        struct outmsg *m = a->outq;
        a->outq = m->next;
        free(m->data);
        free(m);
    }
}
