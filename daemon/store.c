/* daemon/store.c - commits that failed, their retries, and checkpoints
 *
 * When a commit fails (the state directory is full or read-only),
 * pilotd keeps going on its journal (daemon/db.h) without acknowledging
 * or starting anything, and retries from the loop and from requests
 * that would write (docs/state.md).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon/daemon_private.h"
#include "proto/log.h"
#include "proto/strv.h"

/* "ENOSPC": the name of the errno values a state directory fails with. */
static const char *errno_name(int errnum)
{
    switch (errnum) {
    case ENOSPC: return "ENOSPC";
    case EDQUOT: return "EDQUOT";
    case EFBIG: return "EFBIG";
    case EROFS: return "EROFS";
    case EACCES: return "EACCES";
    case EBUSY: return "EBUSY";
    case ENOMEM: return "ENOMEM";
    default: return "EIO";
    }
}

/* What the status object says of the state directory: "ok", "full",
 * "read-only" or "error". */
static const char *state_name(int errnum)
{
    if (errnum == 0)
        return "ok";
    if (errnum == ENOSPC || errnum == EDQUOT || errnum == EFBIG)
        return "full";
    if (errnum == EROFS || errnum == EACCES)
        return "read-only";
    return "error";
}

/* "the state directory /p/pilots/p1 is full (ENOSPC)" */
static void why_text(const struct pl_daemon *d, int errnum, char *buf,
                     size_t len)
{
    const char *st = state_name(errnum);

    snprintf(buf, len, "the state directory %s %s (%s)", d->dir,
             !strcmp(st, "full")        ? "is full"
             : !strcmp(st, "read-only") ? "is read-only"
                                        : "cannot be written",
             errno_name(errnum));
}

const char *pl_store_state(const struct pl_daemon *d, char *why, size_t len)
{
    const char *text;
    int errnum = pl_db_failed(d->db, &text);

    why[0] = '\0';
    if (errnum) {
        why_text(d, errnum, why, len);
        snprintf(why + strlen(why), len - strlen(why), ": %s", text);
    }
    return state_name(errnum);
}

void pl_store_failed(struct pl_daemon *d)
{
    const char *text;
    int errnum = pl_db_failed(d->db, &text);
    char why[PL_PATH_MAX + 64], reply[PL_PATH_MAX + 160];

    why_text(d, errnum, why, sizeof(why));
    if (!d->store_failed_since) {
        d->store_failed_since = pl_now();
        pl_dispatch_recall_all(d);
        pl_log(LOG_ERR, "%s: %s; until it can be written again, nothing "
               "is stored, submissions and cancels are refused, no task "
               "starts, reads are served (retrying every second)", why,
               text);
    }
    else if (errnum != d->store_errno)
        pl_log(LOG_WARNING, "%s now: %s", why, text);
    d->store_errno = errnum;
    /* the batch's acknowledgements become errors: its submissions are
     * forgotten (they were not stored), its cancels may not be stored */
    for (struct pl_out *o = d->outq; o; o = o->next) {
        if (!o->needs_commit || o->sock != d->csock)
            continue;
        snprintf(reply, sizeof(reply), "%s: %s", o->cancel
                 ? "the cancel may not be stored" : "not stored", why);
        pl_out_undo(d, o, reply, errnum);
        o->needs_commit = false; /* the error goes */
    }
}

void pl_store_retry(struct pl_daemon *d, double interval)
{
    struct pl_error err;
    double t = pl_mono();
    size_t n = pl_db_unstored(d->db);

    if (!pl_db_failed(d->db, NULL) || t - d->store_retry_at < interval)
        return;
    d->store_retry_at = t;
    if (pl_db_commit(d->db, &err) < 0)
        return; /* pl_daemon_flush() says it if the reason changed */
    pl_log(LOG_NOTICE, "the state directory %s can be written again after "
           "%.1f s: %zu changes stored", d->dir,
           pl_now() - d->store_failed_since, n);
    d->store_failed_since = 0;
    d->store_errno = 0;
    pl_dispatch_send(d);
    d->want_sched = true;
}

void pl_store_checkpoint(struct pl_daemon *d, double interval)
{
    struct pl_error err;
    double t = pl_mono();

    if (pl_db_failed(d->db, NULL) || t - d->ckpt_at < interval)
        return;
    d->ckpt_at = t;
    if (pl_db_checkpoint(d->db, &err) < 0)
        pl_log(LOG_DEBUG, "checkpoint: %s", err.text);
}

bool pl_store_refused(struct pl_daemon *d, const struct pl_req *r)
{
    char why[PL_PATH_MAX + 64], text[PL_PATH_MAX + 160];
    int errnum;

    pl_store_retry(d, STORE_RETRY_REQ);
    if (!(errnum = pl_db_failed(d->db, NULL)))
        return false;
    why_text(d, errnum, why, sizeof(why));
    snprintf(text, sizeof(text), "%s: pilotd stores nothing new until it "
             "can write there again", why);
    pl_out_err(d, r, errnum, text);
    return true;
}

void pl_store_text(const struct pl_daemon *d, struct pl_error *errp)
{
    int saved = errno, errnum = pl_db_failed(d->db, NULL);
    char why[PL_PATH_MAX + 64];

    if (!errnum && (saved == ENOSPC || saved == EDQUOT || saved == EROFS))
        errnum = saved; /* this write only: SQLite kept the transaction */
    if (!errnum)
        return;
    why_text(d, errnum, why, sizeof(why));
    pl_errprintf(errp, "not stored: %s", why);
    errno = saved;
}
