/* daemon/cancel.c - a cancel request, in turns of the loop
 *
 * A cancel names tasks (an array's id: all its elements).  Every id is
 * checked before anything changes; then the tasks are canceled
 * CANCEL_TURN at a time, one turn of the loop each (an idle handle runs
 * the next turn once the loop has read its sockets), so that a cancel of
 * a million tasks, about 5 us a task, does not hold the loop for
 * seconds.  The reply, {"canceled": [ids], "final": [ids]}, leaves with
 * the commit of the last turn.  Meanwhile the other requests are served:
 * one that lists the array sees it part canceled.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_private.h"
#include "proto/clientmsg.h"
#include "proto/log.h"
#include "proto/query.h"

#define CANCEL_TURN 5000 /* tasks canceled in one turn of the loop */

/* A cancel being done: what its reply needs, the ids left. */
struct pl_canceljob {
    struct pl_canceljob *next;
    unsigned char rid[256];
    size_t ridlen;
    uint64_t seq;
    uint64_t *ids;               /* owned; 'nids', done up to 'at' */
    size_t nids, at;
    size_t ncanceled;            /* the canceled so far: ids[0..ncanceled)
                                    (at most 'at': they are moved down) */
    uint64_t *final;             /* owned: those that had ended, 'nfinal' */
    size_t nfinal;
};

/* A key of role submit cancels only what it submitted: -1 with errp
 * (EACCES) if any of 'ids' was submitted by another key. */
static int own_only(struct pl_daemon *d, const struct pl_req *r,
                    const uint64_t *ids, size_t nids, struct pl_error *errp)
{
    char by[64];
    uint64_t other;

    if (pl_db_task_not_by(d->db, ids, nids, r->key->name, &other, by,
                          sizeof(by), errp) < 0)
        return -1;
    if (!other)
        return 0;
    if (by[0])
        return pl_errset(errp, EACCES, "key '%s' (role submit) may cancel "
                         "only its own tasks: task %llu was submitted by "
                         "key '%s'", r->key->name,
                         (unsigned long long)other, by);
    return pl_errset(errp, EACCES, "key '%s' (role submit) may cancel only "
                     "its own tasks: task %llu was not submitted with it",
                     r->key->name, (unsigned long long)other);
}

static void job_free(struct pl_canceljob *j)
{
    free(j->ids);
    free(j->final);
    free(j);
}

/* Cancel up to CANCEL_TURN more tasks of 'j'; once all are, its reply
 * is queued (sent after the batch's commit) and true returned. */
static bool job_turn(struct pl_daemon *d, struct pl_canceljob *j)
{
    size_t end = j->nids - j->at > CANCEL_TURN ? j->at + CANCEL_TURN
                                               : j->nids;

    for (; j->at < end; j->at++) {
        uint64_t id = j->ids[j->at];
        /* a queued element of a run ends now: its command is not needed */
        struct pl_dtask *t = pl_sched_task_get_bare(d->sched, id);
        if (t) {
            pl_dtask_cancel(d, t);
            j->ids[j->ncanceled++] = id;
        }
        else
            j->final[j->nfinal++] = id;
    }
    if (j->at < j->nids)
        return false;
    struct pl_out *o = pl_out_new(d->csock, j->rid, j->ridlen);
    if (!o)
        return true; /* the client's wait says it got no answer */
    struct pl_wmap data;
    o->seq = j->seq;
    pl_wbuf_reply(&o->w, j->seq, 0, NULL);
    pl_wmap_begin(&o->w, &data);
    pl_wm_uintv(&data, "canceled", j->ids, (uint32_t)j->ncanceled);
    pl_wm_uintv(&data, "final", j->final, (uint32_t)j->nfinal);
    /* the cancel of a queued task is a write: acknowledged once stored */
    o->needs_commit = true;
    o->cancel = true;
    pl_out_push(d, o);
    return true;
}

/* The next turn of the first cancel waiting, then the batch's end. */
static void idle_cb(uv_idle_t *h)
{
    struct pl_daemon *d = h->data;
    struct pl_canceljob *j = d->cancels;
    uint64_t t0 = uv_hrtime();

    if (!j) {
        uv_idle_stop(h);
        return;
    }
    int errnum = pl_db_failed(d->db, NULL);
    if (errnum) {
        /* nothing is stored meanwhile: the rest is refused, and the
         * reply says how far it got */
        struct pl_error err;
        struct pl_out *o = pl_out_new(d->csock, j->rid, j->ridlen);
        pl_store_text(d, &err);
        if (o) {
            char text[sizeof(err.text) + 96];
            snprintf(text, sizeof(text), "%s (the first %zu of the %zu "
                     "tasks were canceled)", err.text, j->at, j->nids);
            o->seq = j->seq;
            pl_wbuf_reply(&o->w, j->seq, errnum, text);
            pl_out_push(d, o);
        }
        d->cancels = j->next;
        job_free(j);
    }
    else if (job_turn(d, j)) {
        d->cancels = j->next;
        job_free(j);
    }
    pl_daemon_flush(d);
    pl_daemon_batch_time(d, t0);
    if (!d->cancels)
        uv_idle_stop(h);
}

void pl_cancel(struct pl_daemon *d, const struct pl_req *r,
               const struct pl_msg *m)
{
    struct pl_error err;
    struct pl_sel_req s;
    struct pl_canceljob *j = NULL;
    uint64_t *ids = NULL;
    size_t nids = 0;

    if (pl_sel_req_decode(m->body, &s, &err) < 0) {
        pl_out_err(d, r, errno, err.text);
        return;
    }
    if (!pl_sel_req_given(&s)) {
        errno = EINVAL;
        pl_errprintf(&err, "no task ids given");
        goto bad;
    }
    if (pl_store_refused(d, r))
        goto done;
    /* all ids must exist before anything changes: those of the request
     * (the elements of an array exist: they are read from the table) */
    for (uint32_t i = 0; i < s.nids; i++) {
        const struct pl_dtask *t = pl_sched_task_get(d->sched, s.ids[i]);
        if (t && t->fn == PL_FN_POOL) {
            errno = EINVAL;
            pl_errprintf(&err, "task %llu is a pool's job: pilot pool stop "
                         "stops the pool", (unsigned long long)s.ids[i]);
            goto bad;
        }
        if (t)
            continue;
        int st = pl_db_task_state(d->db, s.ids[i], &err);
        if (st < 0)
            goto bad;
        if (st == 0) {
            errno = ENOENT;
            pl_errprintf(&err, "no task %llu", (unsigned long long)s.ids[i]);
            goto bad;
        }
    }
    if (pl_query_resolve(pl_db_handle(d->db), s.ids, s.nids, s.elems,
                         s.nelems, true, &ids, &nids, &err) < 0)
        goto bad;
    if (r->key->role == PL_ROLE_SUBMIT && own_only(d, r, ids, nids, &err) < 0)
        goto bad;
    if (!(j = calloc(1, sizeof(*j))) || r->ridlen > sizeof(j->rid)
        || !(j->final = malloc((nids ? nids : 1) * sizeof(*j->final)))) {
        errno = ENOMEM;
        pl_errprintf(&err, "out of memory");
        goto bad;
    }
    memcpy(j->rid, r->rid, r->ridlen);
    j->ridlen = r->ridlen;
    j->seq = r->seq;
    j->ids = ids; /* the job's from here */
    j->nids = nids;
    ids = NULL;
    /* a cancel of a few tasks is done in its batch; a larger one starts
     * in the next turn (this one resolved its ids), and a cancel waits
     * behind the ones before it */
    if (!d->cancels && nids <= CANCEL_TURN && job_turn(d, j)) {
        job_free(j);
        goto done;
    }
    struct pl_canceljob **tail = &d->cancels;
    while (*tail)
        tail = &(*tail)->next;
    *tail = j;
    uv_idle_start(&d->cancel_idle, idle_cb);
    goto done;
bad:
    pl_out_err(d, r, errno ? errno : EINVAL, err.text);
    if (j)
        job_free(j);
done:
    pl_sel_req_clear(&s);
    free(ids);
}

void pl_cancel_free_all(struct pl_daemon *d)
{
    struct pl_canceljob *j, *next;

    for (j = d->cancels; j; j = next) {
        next = j->next;
        job_free(j);
    }
    d->cancels = NULL;
}
