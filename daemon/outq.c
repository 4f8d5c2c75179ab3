/* daemon/outq.c - what pilotd sends, held until the batch's commit
 *
 * Replies and agent messages are queued during a batch of requests and
 * leave in order after its commit (pl_daemon_flush()), so that nothing
 * acknowledges a write that is not stored: when the commit fails, a
 * client's acknowledgement becomes an error and an agent's is not sent
 * (the agent sends again).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "daemon/daemon_private.h"
#include "proto/log.h"
#include "proto/mpjson.h"
#include "proto/zsock.h"

struct pl_out *pl_out_new(void *sock, const void *rid, size_t ridlen)
{
    struct pl_out *o = calloc(1, sizeof(*o));

    if (!o)
        return NULL;
    o->sock = sock;
    if (ridlen > sizeof(o->rid))
        ridlen = sizeof(o->rid);
    memcpy(o->rid, rid, ridlen);
    o->ridlen = ridlen;
    return o;
}

void pl_out_push(struct pl_daemon *d, struct pl_out *o)
{
    *d->outtail = o;
    d->outtail = &o->next;
}

void pl_out_free(struct pl_out *o)
{
    pl_wbuf_destroy(&o->w);
    free(o->undo);
    free(o);
}

struct pl_out *pl_out_agent(struct pl_daemon *d, const struct pl_node *n)
{
    const struct pl_link *l = pl_agents_link(d, n);

    return l ? pl_out_new(d->asock, l->rid, l->ridlen) : NULL;
}

void pl_out_err(struct pl_daemon *d, const struct pl_req *r, int errnum,
                const char *text)
{
    struct pl_out *o = pl_out_new(d->csock, r->rid, r->ridlen);

    if (!o)
        return;
    o->seq = r->seq;
    pl_wbuf_reply(&o->w, r->seq, errnum ? errnum : EIO, text);
    pl_out_push(d, o);
}

struct pl_out *pl_out_json(struct pl_daemon *d, const struct pl_req *r,
                           json_t *data)
{
    struct pl_out *o = pl_out_new(d->csock, r->rid, r->ridlen);

    if (!o)
        goto done;
    o->seq = r->seq;
    pl_wbuf_reply(&o->w, r->seq, 0, NULL);
    pl_mpjson_pack(&o->w.pk, data);
    pl_out_push(d, o);
done:
    json_decref(data);
    return o;
}

void pl_out_undo(struct pl_daemon *d, struct pl_out *o, const char *why,
                 int errnum)
{
    for (size_t i = 0; i < o->nundo; i++)
        pl_dtask_forget(d, o->undo[i]);
    o->nundo = 0;
    pl_wbuf_destroy(&o->w);
    pl_wbuf_reply(&o->w, o->seq, errnum, why);
}

bool pl_outq_acks(const struct pl_daemon *d)
{
    for (const struct pl_out *o = d->outq; o; o = o->next)
        if (o->needs_commit && o->sock == d->csock)
            return true;
    return false;
}

/* Send 'o' and free it. */
static void send_one(struct pl_daemon *d, struct pl_out *o)
{
    if (pl_zsock_send(o->sock, o->rid, o->ridlen, o->w.sb.data,
                      o->w.sb.size) < 0) {
        /* a client that left, or does not read its replies */
        if (o->watch[0])
            pl_watch_push_failed(d, o->watch); /* said once there */
        else if (o->sock == d->csock)
            pl_daemon_bad_log(d, LOG_WARNING, "send to client: %s "
                              "(message dropped)", zmq_strerror(errno));
        else
            pl_log(LOG_WARNING, "send to agent: %s (message dropped)",
                   zmq_strerror(errno));
    }
    pl_out_free(o);
}

void pl_outq_send(struct pl_daemon *d, bool stored)
{
    struct pl_out *o, *next;

    for (o = d->outq; o; o = next) {
        next = o->next;
        if (!stored && o->needs_commit)
            pl_out_free(o); /* not stored: the agent sends it again */
        else
            send_one(d, o);
    }
    d->outq = NULL;
    d->outtail = &d->outq;
}

void pl_outq_send_runs(struct pl_daemon *d)
{
    struct pl_out **pp = &d->outq;
    struct pl_out *o;

    for (o = d->outq; o; o = o->next)
        if (o->sock == d->asock && !o->run && !o->ack)
            return;
    while ((o = *pp)) {
        if (!o->run) {
            pp = &o->next;
            continue;
        }
        *pp = o->next;
        if (d->outtail == &o->next)
            d->outtail = pp;
        send_one(d, o);
    }
}

void pl_outq_free(struct pl_daemon *d)
{
    struct pl_out *o, *next;

    for (o = d->outq; o; o = next) {
        next = o->next;
        pl_out_free(o);
    }
    d->outq = NULL;
    d->outtail = &d->outq;
}
