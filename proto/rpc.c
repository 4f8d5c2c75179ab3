/* proto/rpc.c - a client's request/reply calls to pilotd over a DEALER */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include <zmq.h>

#include "proto/rpc.h"
#include "proto/zmon.h"
#include "proto/zsock.h"
#include "proto/zwatch.h"

/* Handshakes pilotd may break off in a row before we give up: one can
 * be a pilotd going down; three in the 0.3 s of ZeroMQ's reconnects are
 * a server key that is not pilotd's. */
#define HANDSHAKE_TRIES 3

struct pl_rpc {
    uv_loop_t loop;
    void *ctx;
    void *sock;
    struct pl_zwatch *zw;
    struct pl_zmon *mon;      /* the DEALER's connection and handshakes */
    uv_timer_t timer;
    uint64_t seq;
    char endpoint[256];
    struct pl_keys_peer keys;
    bool connected;           /* a TCP connection was made */
    bool handshaken;          /* a CURVE handshake completed */
    unsigned refused;         /* ZAP status code of a refusal, else 0 */
    int hs_failures;          /* handshakes broken off since the last one
                                 that completed */
    /* state of the call in progress */
    uint64_t want_seq;
    struct pl_msg *reply;
    int done;     /* 1 got reply, -1 timed out */
    struct pl_error err;
    /* pushes and connection events (pl_rpc_set_push()) */
    pl_rpc_push_f push;
    pl_rpc_event_f event;
    void *push_arg;
    bool waiting;             /* in pl_rpc_wait() */
    bool woken;               /* ... and a push or event came */
};

/* Give a push or an event to the owner; pl_rpc_wait() returns. */
static void woken(struct pl_rpc *r)
{
    if (r->waiting) {
        r->woken = true;
        uv_stop(&r->loop);
    }
}

static void recv_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct pl_rpc *r = arg;
    (void)zw;
    (void)revents;

    for (int i = 0; i < PL_ZBATCH && !r->done && !r->woken; i++) {
        zmq_msg_t body;
        struct pl_msg m;
        zmq_msg_init(&body);
        if (pl_zsock_recv(r->sock, NULL, &body) < 0) {
            zmq_msg_close(&body);
            if (errno == EAGAIN)
                break;
            continue;
        }
        /* the reply outlives the ZeroMQ message: decode a copy it owns */
        size_t len = zmq_msg_size(&body);
        void *copy = malloc(len ? len : 1);
        if (!copy) {
            zmq_msg_close(&body);
            continue;
        }
        memcpy(copy, zmq_msg_data(&body), len);
        /* pilotd is the one peer here, and a listing of 100,000 tasks
         * holds more than PL_MSG_MAX_OBJECTS */
        if (pl_msg_decode_max(copy, len, PL_MSG_MAX, &m, &r->err) < 0) {
            uint64_t v, seq;
            /* a pilotd of another version: say so rather than time out */
            if (pl_msg_peek(copy, len, &v, &seq) == 0 && seq == r->want_seq
                && v != PL_PROTO_VERSION) {
                pl_errprintf(&r->err, "pilotd speaks protocol %llu, this "
                             "pilot command %d: use the pilot commands that "
                             "came with that pilotd", (unsigned long long)v,
                             PL_PROTO_VERSION);
                r->done = -2;
            }
            free(copy);
        }
        else {
            m.own = copy;
            if (m.type == PL_MSG_REPLY && m.seq == r->want_seq
                && r->reply) {
                *r->reply = m;
                r->done = 1;
            }
            else if (m.type != PL_MSG_REPLY && r->push) {
                r->push(r, &m, r->push_arg);
                pl_msg_release(&m);
                woken(r);
            }
            else
                pl_msg_release(&m); /* a late reply to an old request */
        }
        zmq_msg_close(&body);
    }
    if (r->done)
        uv_stop(&r->loop);
}

/* Whether the connection has failed for good: pilotd refused our key,
 * or breaks off every handshake. */
static bool hopeless(const struct pl_rpc *r)
{
    return r->refused || (!r->handshaken
                          && r->hs_failures >= HANDSHAKE_TRIES);
}

static void mon_cb(struct pl_zmon *m, int event, uint32_t value, void *arg)
{
    struct pl_rpc *r = arg;
    (void)m;

    switch (event) {
    case ZMQ_EVENT_CONNECTED:
        r->connected = true;
        break;
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        r->handshaken = true;
        r->hs_failures = 0;
        if (r->event) {
            r->event(r, event, r->push_arg);
            woken(r);
        }
        break;
    case ZMQ_EVENT_DISCONNECTED:
        if (r->event) {
            r->event(r, event, r->push_arg);
            woken(r);
        }
        break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        r->refused = value ? value : 400;
        break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        r->hs_failures++;
        break;
    default:
        break;
    }
    if (hopeless(r))
        uv_stop(&r->loop);
}

static void timer_cb(uv_timer_t *t)
{
    struct pl_rpc *r = t->data;

    if (!r->waiting)
        r->done = -1;
    uv_stop(&r->loop);
}

struct pl_rpc *pl_rpc_new(const char *endpoint,
                          const struct pl_keys_peer *keys,
                          struct pl_error *errp)
{
    struct pl_rpc *r;

    if (!(r = calloc(1, sizeof(*r)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    uv_loop_init(&r->loop);
    uv_timer_init(&r->loop, &r->timer);
    r->timer.data = r;
    snprintf(r->endpoint, sizeof(r->endpoint), "%s", endpoint);
    r->keys = *keys;
    if (!(r->ctx = zmq_ctx_new())) {
        pl_errprintf(errp, "zmq_ctx_new: %s", zmq_strerror(errno));
        goto error;
    }
    if (!(r->sock = pl_zsock_new(r->ctx, ZMQ_DEALER, errp))
        || pl_zsock_curve_client(r->sock, keys->server, &keys->own, errp) < 0
        || !(r->mon = pl_zmon_new(&r->loop, r->ctx, r->sock,
                                  ZMQ_EVENT_CONNECTED
                                      | ZMQ_EVENT_DISCONNECTED
                                      | ZMQ_EVENT_HANDSHAKE_SUCCEEDED
                                      | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                                      | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                                      | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                                  mon_cb, r, errp)))
        goto error;
    if (zmq_connect(r->sock, endpoint) < 0) {
        pl_errprintf(errp, "connect %s: %s", endpoint, zmq_strerror(errno));
        goto error;
    }
    if (!(r->zw = pl_zwatch_new(&r->loop, r->sock, ZMQ_POLLIN, recv_cb, r))
        || pl_zwatch_start(r->zw) < 0) {
        pl_errprintf(errp, "watch socket: %s", strerror(errno));
        goto error;
    }
    return r;
error:
    pl_rpc_free(r);
    return NULL;
}

void pl_rpc_free(struct pl_rpc *r)
{
    if (!r)
        return;
    int saved = errno;
    int linger = 0;
    pl_zwatch_free(r->zw);
    pl_zmon_free(r->mon);
    uv_close((uv_handle_t *)&r->timer, NULL);
    uv_run(&r->loop, UV_RUN_DEFAULT); /* runs the close callbacks */
    uv_loop_close(&r->loop);
    if (r->sock) {
        /* a request nobody answered must not hold up the exit */
        zmq_setsockopt(r->sock, ZMQ_LINGER, &linger, sizeof(linger));
        zmq_close(r->sock);
    }
    if (r->ctx)
        zmq_ctx_term(r->ctx);
    explicit_bzero(&r->keys, sizeof(r->keys));
    free(r);
    errno = saved;
}

uint64_t pl_rpc_seq(struct pl_rpc *r)
{
    return ++r->seq;
}

int pl_rpc_call(struct pl_rpc *r, struct pl_wbuf *w, int timeout_ms,
                struct pl_msg *reply, const msgpack_object **data,
                struct pl_error *errp)
{
    int64_t errnum = 0;
    char *text = NULL;

    r->want_seq = r->seq;
    r->reply = reply;
    r->done = 0;
    if (pl_zsock_send(r->sock, NULL, 0, w->sb.data, w->sb.size) < 0) {
        r->reply = NULL;
        return pl_errprintf(errp, "send to pilotd: %s", zmq_strerror(errno));
    }
    /* the loop runs only inside calls: its clock stopped at the end of
     * the last one, and a timer set from it would be due already after
     * an idle spell longer than the timeout */
    uv_update_time(&r->loop);
    uv_timer_start(&r->timer, timer_cb, (uint64_t)timeout_ms, 0);
    while (!r->done && !hopeless(r))
        uv_run(&r->loop, UV_RUN_DEFAULT);
    uv_timer_stop(&r->timer);
    r->reply = NULL; /* a reply that comes later is a late one */
    if (r->done == -2) {
        errno = EPROTO;
        return pl_errprintf(errp, "%s", r->err.text);
    }
    if (r->done <= 0 && r->refused) {
        errno = EACCES;
        /* N.B. short: errp holds 160 characters, the path may be long */
        return pl_errprintf(errp, "pilotd refused this client's key %s/%s.key"
                            " (not in the pilot's allow-list for clients)",
                            r->keys.dir, r->keys.name);
    }
    if (r->done <= 0 && hopeless(r)) {
        errno = EPROTO;
        return pl_errprintf(errp, "pilotd at %s broke off the CURVE "
                            "handshake %d times: is %s/server.pub this "
                            "pilot's key?", r->endpoint, r->hs_failures,
                            r->keys.dir);
    }
    if (r->done < 0) {
        errno = ETIMEDOUT;
        if (r->connected && !r->handshaken)
            return pl_errprintf(errp, "pilotd at %s did not answer within "
                                "%.1f s (no CURVE handshake completed: "
                                "authentication may have failed)",
                                r->endpoint, timeout_ms / 1000.0);
        return pl_errprintf(errp, "pilotd at %s did not answer within %.1f s",
                            r->endpoint, timeout_ms / 1000.0);
    }
    if (pl_reply_decode(reply->body, &errnum, &text, data, errp) < 0)
        goto error;
    if (errnum != 0) {
        pl_errprintf(errp, "%s", text ? text : strerror((int)errnum));
        free(text);
        pl_msg_release(reply);
        errno = errnum > 0 && errnum < 4096 ? (int)errnum : EIO;
        return -1;
    }
    free(text);
    if (!*data) {
        pl_errprintf(errp, "reply without data");
        errno = EPROTO;
        goto error;
    }
    return 0;
error:
    pl_msg_release(reply);
    return -1;
}

void pl_rpc_set_push(struct pl_rpc *r, pl_rpc_push_f push,
                     pl_rpc_event_f event, void *arg)
{
    r->push = push;
    r->event = event;
    r->push_arg = arg;
}

int pl_rpc_wait(struct pl_rpc *r, int timeout_ms)
{
    /* no call in progress: recv_cb() reads again (a reply that comes
     * now is a late one) */
    r->done = 0;
    r->reply = NULL;
    r->waiting = true;
    r->woken = false;
    if (timeout_ms > 0) {
        uv_update_time(&r->loop); /* as in pl_rpc_call() */
        uv_timer_start(&r->timer, timer_cb, (uint64_t)timeout_ms, 0);
        uv_run(&r->loop, UV_RUN_DEFAULT);
        uv_timer_stop(&r->timer);
    }
    else
        uv_run(&r->loop, UV_RUN_NOWAIT);
    r->waiting = false;
    bool got = r->woken;
    r->woken = false;
    return got ? 1 : 0;
}
