/* client/sub.c - a client's watch of task ends (proto/watchmsg.h) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <zmq.h>

#include "client/sub.h"
#include "proto/strv.h"

struct pl_sub {
    struct pl_rpc *rpc;        /* borrowed */
    int timeout_ms;
    char token[PL_WATCH_TOKEN_MAX + 1];
    pl_sub_end_f cb;
    void *arg;
    bool made;                 /* pilotd made the watch for us */
    bool all;                  /* it holds every task */
    bool empty;                /* it was made empty (pl_sub_add()) */
    struct pl_sel_req *sels;   /* what it was given, to make it again */
    size_t nsels, capsels;
    uint64_t *noted;           /* the tasks submits added (pl_sub_note()) */
    size_t nnoted, capnoted;
    uint64_t last_seq;         /* the last end given to cb */
    uint64_t last_n;           /* the last push read */
    uint64_t pending;
    bool resync;               /* ask pilotd again at the next wait */
    bool down;                 /* the connection broke: its next
                                  handshake is a new connection */
    bool in_resync;            /* that request is out: pushes of the old
                                  stream are dropped until its reply */
    bool got;                  /* something came since the wait began */
    double heard;              /* pl_mono() of pilotd's last word */
};

static void push_cb(struct pl_rpc *r, const struct pl_msg *m, void *arg)
{
    struct pl_sub *s = arg;
    struct pl_error err;
    struct pl_ends e;
    (void)r;

    if (m->type != PL_MSG_ENDS || pl_ends_decode(m->body, &e, &err) < 0)
        return;
    if (strcmp(e.token, s->token) || !s->made || s->in_resync
        || e.n <= s->last_n)
        goto done; /* another watch's, or one read already */
    s->heard = pl_mono();
    if (e.n != s->last_n + 1) {
        /* pushes were lost: pilotd sends again what came after the last
         * end we have (pl_sub_wait()) */
        s->resync = true;
        goto done;
    }
    s->last_n = e.n;
    for (uint32_t i = 0; i < e.nends; i++) {
        if (e.ends[i].seq <= s->last_seq)
            continue; /* given already */
        s->last_seq = e.ends[i].seq;
        if (s->cb)
            s->cb(s, &e.ends[i], s->arg);
    }
    s->pending = e.pending;
    s->got = true;
done:
    pl_ends_clear(&e);
}

static void event_cb(struct pl_rpc *r, int event, void *arg)
{
    struct pl_sub *s = arg;
    (void)r;

    /* ZeroMQ drops what was queued on a connection that broke: what
     * pilotd pushed meanwhile is asked for again */
    if (event == ZMQ_EVENT_DISCONNECTED)
        s->down = true;
    else if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED && s->down) {
        s->down = false;
        s->resync = true;
    }
}

/* 24 random bytes as 32 characters of A-Z a-z 0-9 - _. */
static int make_token(char *buf, size_t len)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwx"
                            "yz0123456789-_";
    unsigned char r[24];
    size_t n = 0;

    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        errno = EIO;
        return -1;
    }
    for (size_t i = 0; i + 2 < sizeof(r) && n + 4 < len; i += 3) {
        uint32_t v = (uint32_t)r[i] << 16 | (uint32_t)r[i + 1] << 8 | r[i + 2];
        for (int k = 3; k >= 0; k--)
            buf[n++] = a[(v >> (6 * k)) & 63];
    }
    buf[n] = '\0';
    return 0;
}

struct pl_sub *pl_sub_new(struct pl_rpc *rpc, const char *token,
                          int timeout_ms, pl_sub_end_f cb, void *arg,
                          struct pl_error *errp)
{
    struct pl_sub *s;

    if (token && !pl_watch_token_ok(token)) {
        pl_errset(errp, EINVAL, "watch token: want %d to %d of A-Z a-z 0-9 "
                  "_ -", PL_WATCH_TOKEN_MIN, PL_WATCH_TOKEN_MAX);
        return NULL;
    }
    if (!(s = calloc(1, sizeof(*s)))) {
        pl_errset(errp, ENOMEM, "out of memory");
        return NULL;
    }
    if (token)
        snprintf(s->token, sizeof(s->token), "%s", token);
    else if (make_token(s->token, sizeof(s->token)) < 0) {
        pl_errprintf(errp, "no random bytes for a watch token");
        free(s);
        return NULL;
    }
    s->rpc = rpc;
    s->timeout_ms = timeout_ms;
    s->cb = cb;
    s->arg = arg;
    s->pending = UINT64_MAX;
    s->heard = pl_mono();
    pl_rpc_set_push(rpc, push_cb, event_cb, s);
    return s;
}

void pl_sub_free(struct pl_sub *s)
{
    if (!s)
        return;
    int saved = errno;
    if (s->rpc)
        pl_rpc_set_push(s->rpc, NULL, NULL, NULL);
    for (size_t i = 0; i < s->nsels; i++)
        pl_sel_req_clear(&s->sels[i]);
    free(s->sels);
    free(s->noted);
    free(s);
    errno = saved;
}

const char *pl_sub_token(const struct pl_sub *s)
{
    return s->token;
}

uint64_t pl_sub_pending(const struct pl_sub *s)
{
    return s->pending;
}

uint64_t pl_sub_last_seq(const struct pl_sub *s)
{
    return s->last_seq;
}

void pl_sub_set_rpc(struct pl_sub *s, struct pl_rpc *rpc)
{
    s->rpc = rpc;
    if (rpc)
        pl_rpc_set_push(rpc, push_cb, event_cb, s);
    s->resync = true;
}

/* Send WATCH 'q' and read its reply into 'rep'.  0, or -1 (errp). */
static int watch_call(struct pl_sub *s, const struct pl_watch_req *q,
                      struct pl_watch_reply *rep, struct pl_error *errp)
{
    struct pl_wbuf w;
    struct pl_msg reply;
    const msgpack_object *data;
    int rc;

    pl_watch_req_encode(&w, pl_rpc_seq(s->rpc), q);
    rc = pl_rpc_call(s->rpc, &w, s->timeout_ms, &reply, &data, errp);
    pl_wbuf_destroy(&w);
    if (rc < 0)
        return -1;
    rc = pl_watch_reply_decode(data, rep, errp);
    pl_msg_release(&reply);
    return rc;
}

/* A copy of 's' into the list, to make the watch again from. */
static int keep_sel(struct pl_sub *s, const struct pl_sel_req *sel)
{
    struct pl_sel_req c = { 0 };

    if (pl_grow(&s->sels, &s->capsels, s->nsels, 1, sizeof(*s->sels)) < 0)
        return -1;
    if ((sel->nids && !(c.ids = malloc(sel->nids * sizeof(*c.ids))))
        || (sel->nelems
            && !(c.elems = malloc(sel->nelems * 2 * sizeof(*c.elems))))) {
        pl_sel_req_clear(&c);
        return -1;
    }
    if (sel->nids)
        memcpy(c.ids, sel->ids, sel->nids * sizeof(*c.ids));
    if (sel->nelems)
        memcpy(c.elems, sel->elems, sel->nelems * 2 * sizeof(*c.elems));
    c.nids = sel->nids;
    c.nelems = sel->nelems;
    s->sels[s->nsels++] = c;
    return 0;
}

int pl_sub_add(struct pl_sub *s, const struct pl_sel_req *sel, bool all,
               struct pl_error *errp)
{
    struct pl_watch_req q = { .attach = true, .all = all };
    struct pl_watch_reply rep;

    bool some = !all && sel && pl_sel_req_given(sel);

    snprintf(q.token, sizeof(q.token), "%s", s->token);
    if (some)
        q.sel = *sel; /* borrowed by the encoder */
    q.make = !all && !some;
    if (some && keep_sel(s, sel) < 0)
        return pl_errset(errp, ENOMEM, "out of memory");
    if (watch_call(s, &q, &rep, errp) < 0) {
        if (some)
            pl_sel_req_clear(&s->sels[--s->nsels]);
        return -1;
    }
    s->all = s->all || all;
    s->empty = s->empty || q.make;
    if (!s->made) {
        /* a new watch pushes what ends from now on */
        s->made = true;
        s->last_seq = rep.seq;
        s->last_n = rep.n;
    }
    else if (rep.n > s->last_n)
        s->resync = true; /* a push before the reply was lost */
    s->pending = rep.pending;
    s->heard = pl_mono();
    s->got = true;
    return 0;
}

int pl_sub_refresh(struct pl_sub *s, struct pl_error *errp)
{
    struct pl_watch_req q = { .attach = true };
    struct pl_watch_reply rep;

    snprintf(q.token, sizeof(q.token), "%s", s->token);
    if (watch_call(s, &q, &rep, errp) < 0) {
        if (errno == ENOENT)
            s->resync = true;
        return -1;
    }
    if (rep.n > s->last_n)
        s->resync = true; /* a push before the reply was lost */
    s->pending = rep.pending;
    s->heard = pl_mono();
    return 0;
}

int pl_sub_note(struct pl_sub *s, const uint64_t *ids, size_t n)
{
    if (n == 0)
        return 0;
    if (pl_grow(&s->noted, &s->capnoted, s->nnoted, n, sizeof(*s->noted))
        < 0)
        return -1;
    memcpy(s->noted + s->nnoted, ids, n * sizeof(*ids));
    s->nnoted += n;
    return 0;
}

/* Make the watch again, not attached, from what it was given: every
 * task, or its selections, the tasks submits added to it (in requests
 * of at most PL_REQ_MAX_IDS), or nothing if it was made empty.  With
 * none of these it is not made: the resume gets ENOENT. */
static int remake(struct pl_sub *s, struct pl_watch_req *mk,
                  struct pl_watch_reply *rep, struct pl_error *errp)
{
    snprintf(mk->token, sizeof(mk->token), "%s", s->token);
    if (s->all) {
        mk->all = true;
        return watch_call(s, mk, rep, errp);
    }
    if (s->empty) {
        mk->make = true;
        if (watch_call(s, mk, rep, errp) < 0)
            return -1;
        mk->make = false;
    }
    for (size_t i = 0; i < s->nsels; i++) {
        mk->sel = s->sels[i];
        if (watch_call(s, mk, rep, errp) < 0)
            return -1;
    }
    for (size_t off = 0; off < s->nnoted; off += PL_REQ_MAX_IDS) {
        size_t m = s->nnoted - off;
        mk->sel = (struct pl_sel_req){
            .ids = s->noted + off,
            .nids = (uint32_t)(m < PL_REQ_MAX_IDS ? m : PL_REQ_MAX_IDS),
        };
        if (watch_call(s, mk, rep, errp) < 0)
            return -1;
    }
    return 0;
}

/* Resume: what pilotd has after our last end comes again, in order; a
 * watch it no longer has is made again from what it was given. */
static int resync(struct pl_sub *s, struct pl_error *errp)
{
    struct pl_watch_req q = { .attach = true, .has_after = true,
                              .after = s->last_seq };
    struct pl_watch_reply rep;
    int rc;

    snprintf(q.token, sizeof(q.token), "%s", s->token);
    s->in_resync = true;
    rc = watch_call(s, &q, &rep, errp);
    if (rc < 0 && errno == ENOENT) {
        /* made again, not attached: the resume below attaches it, once
         * it holds every task (its replay reads them all) */
        struct pl_watch_req mk = { 0 };
        rc = remake(s, &mk, &rep, errp);
        if (rc == 0)
            rc = watch_call(s, &q, &rep, errp);
    }
    s->in_resync = false;
    if (rc < 0)
        return -1;
    /* pushes from here on are the resumed stream's */
    s->last_n = rep.n;
    s->pending = rep.pending;
    s->resync = false;
    s->heard = pl_mono();
    s->got = true;
    return 0;
}

int pl_sub_resume(struct pl_sub *s, uint64_t after,
                  const struct pl_sel_req *sel, bool all,
                  struct pl_error *errp)
{
    if (!all && sel && pl_sel_req_given(sel) && keep_sel(s, sel) < 0)
        return pl_errset(errp, ENOMEM, "out of memory");
    s->all = s->all || all;
    s->made = true;
    s->last_seq = after;
    s->last_n = 0;
    return resync(s, errp);
}

int pl_sub_wait(struct pl_sub *s, int timeout_ms, struct pl_error *errp)
{
    double end = pl_mono() + (timeout_ms > 0 ? timeout_ms : 0) / 1000.0;

    s->got = false;
    for (;;) {
        double now = pl_mono();
        if (s->made && (s->resync || now - s->heard >= PL_SUB_SILENCE)) {
            if (resync(s, errp) < 0) {
                s->resync = true;
                s->heard = pl_mono();
                return -1;
            }
        }
        if (s->got)
            return 1;
        now = pl_mono();
        double left = end - now, quiet = s->heard + PL_SUB_SILENCE - now;
        if (left <= 0) {
            pl_rpc_wait(s->rpc, 0);
            return s->got ? 1 : 0;
        }
        double secs = quiet > 0 && quiet < left ? quiet : left;
        pl_rpc_wait(s->rpc, (int)(secs * 1000) + 1);
        if (s->got)
            return 1;
    }
}

int pl_sub_unwatch(struct pl_sub *s, struct pl_error *errp)
{
    struct pl_wbuf w;
    struct pl_msg reply;
    const msgpack_object *data;
    int rc;

    pl_unwatch_encode(&w, pl_rpc_seq(s->rpc), s->token);
    rc = pl_rpc_call(s->rpc, &w, s->timeout_ms, &reply, &data, errp);
    pl_wbuf_destroy(&w);
    if (rc < 0)
        return -1;
    pl_msg_release(&reply);
    s->made = false;
    return 0;
}
