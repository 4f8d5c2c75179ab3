/* client/submit.c - many task specs into pilotd's queue, in requests
 * it takes */
#include <errno.h>
#include <string.h>

#include "client/submit.h"
#include "proto/msg.h"

#define SUBMIT_BYTES (PL_MSG_MAX / 4) /* of one submit request, at most */

/* A submit in progress: its connection, the ids pilotd gave so far. */
struct sender {
    struct pl_conn *conn;
    const char *watch;        /* a watch's token, or NULL */
    json_t *ids;
    uint64_t total;           /* the tasks the specs make, for progress */
    pl_submit_progress_f progress;
    void *arg;
    struct pl_submit_fail *fail;
};

/* The tasks a spec makes: its array's elements, else 1. */
static uint64_t elements(const struct pl_spec *s)
{
    return s->array ? (s->aend - s->astart) / s->astep + 1 : 1;
}

uint64_t pl_submit_tasks(const struct pl_spec *specs, size_t n)
{
    uint64_t total = 0;

    for (size_t i = 0; i < n; i++)
        total += elements(&specs[i]);
    return total;
}

/* Send specs [off, off + m) as one request (when 'slice' is given, it is
 * sent in their place: a slice of spec 'off'); their ids are added to
 * snd->ids, *more is the reply's "more" (a retry's next index; 0: none).
 * 0, or -1 with errp and snd->fail set. */
static int send_req(struct sender *snd, const struct pl_spec *specs,
                    size_t off, size_t m, const struct pl_spec *slice,
                    uint64_t *more, struct pl_error *errp)
{
    json_t *reply = pl_conn_submit(snd->conn, slice ? slice : specs + off,
                                   (uint32_t)m, snd->watch, errp);
    json_t *got, *jm;

    *snd->fail = (struct pl_submit_fail){ .off = off, .m = m,
                                          .slice = slice != NULL };
    if (!reply)
        return -1;
    got = json_object_get(reply, "ids");
    jm = json_object_get(reply, "more");
    if (!json_is_array(got) || json_array_size(got) == 0
        || (jm && (!json_is_integer(jm) || json_integer_value(jm) <= 0))) {
        json_decref(reply);
        snd->fail->bad_reply = true;
        return pl_errset(errp, EPROTO, "pilotd answered submit without "
                         "task ids");
    }
    *more = jm ? (uint64_t)json_integer_value(jm) : 0;
    if (json_array_extend(snd->ids, got) < 0) {
        json_decref(reply);
        return pl_errset(errp, ENOMEM, "out of memory");
    }
    json_decref(reply);
    if (snd->progress)
        snd->progress(json_array_size(snd->ids), snd->total, snd->arg);
    return 0;
}

/* The id of the first task pilotd gave in this submit after 'had'. */
static uint64_t first_id(const struct sender *snd, size_t had)
{
    return (uint64_t)json_integer_value(json_array_get(snd->ids, had));
}

/* Spec 'off', an array of more elements than one request may make
 * (pl_spec_submit_cap(): 5,000, fewer of large commands) or a retry,
 * in requests of at most that many tasks: the first makes the array,
 * the others append to it.  0, or -1 with errp set. */
static int send_array(struct sender *snd, const struct pl_spec *specs,
                      size_t off, struct pl_error *errp)
{
    const struct pl_spec *s = &specs[off];
    struct pl_spec sl = *s; /* a shallow copy: only read, never cleared */
    size_t had = json_array_size(snd->ids);
    uint64_t more = 0;

    if (s->retry) {
        /* pilotd chooses the indexes, and says where to go on */
        for (;;) {
            if (send_req(snd, specs, off, 1, &sl, &more, errp) < 0)
                return -1;
            if (!more)
                return 0;
            sl.append = first_id(snd, had);
            if (!s->array) {
                sl.array = true;
                sl.aend = PL_SPEC_MAX_INDEX;
                sl.astep = 1;
            }
            sl.astart = more; /* one of the range's: the step holds */
        }
    }
    uint64_t n = elements(s), cap = pl_spec_submit_cap(s);
    for (uint64_t e = 0; e < n; e += cap) {
        uint64_t last = e + cap - 1 < n ? e + cap - 1 : n - 1;
        sl.astart = s->astart + e * s->astep;
        sl.aend = s->astart + last * s->astep;
        sl.append = e ? first_id(snd, had) : 0;
        if (send_req(snd, specs, off, 1, &sl, &more, errp) < 0)
            return -1;
    }
    return 0;
}

int pl_submit_specs(struct pl_conn *conn, const struct pl_spec *specs,
                    size_t n, const char *watch, json_t *ids, pl_submit_progress_f progress,
                    void *arg, struct pl_submit_fail *fail,
                    struct pl_error *errp)
{
    struct pl_submit_fail ignored;
    struct sender snd = { .conn = conn, .watch = watch, .ids = ids,
                          .total = pl_submit_tasks(specs, n),
                          .progress = progress, .arg = arg,
                          .fail = fail ? fail : &ignored };

    for (size_t off = 0, m; off < n; off += m) {
        size_t bytes = 0;
        uint64_t tasks = 0, cmds = 0, more;
        if (specs[off].retry
            || elements(&specs[off]) > pl_spec_submit_cap(&specs[off])) {
            if (send_array(&snd, specs, off, errp) < 0)
                return -1;
            m = 1;
            continue;
        }
        /* 100,000 specs of 1.5 MiB commands each would be far over the
         * frame pilotd and ZeroMQ take (PL_MSG_MAX) */
        for (m = 0; off + m < n && m < PL_SPEC_MAX_SUBMIT; m++) {
            const struct pl_spec *s = &specs[off + m];
            size_t b = pl_spec_wire_bytes(s);
            uint64_t c = elements(s) * pl_spec_store_bytes(s);
            if (m > 0 && (s->retry || bytes + b > SUBMIT_BYTES
                          || tasks + elements(s) > PL_SUBMIT_MAX_TASKS
                          || cmds + c > PL_SUBMIT_MAX_BYTES))
                break;
            bytes += b;
            tasks += elements(s);
            cmds += c;
        }
        if (send_req(&snd, specs, off, m, NULL, &more, errp) < 0)
            return -1;
    }
    return 0;
}
