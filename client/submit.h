/* client/submit.h - many task specs into pilotd's queue, in requests
 * it takes
 *
 * pilotd takes at most PL_SPEC_MAX_SUBMIT specs, PL_SUBMIT_MAX_TASKS
 * tasks and PL_SUBMIT_MAX_BYTES of commands (pl_spec_store_bytes(): with
 * a Python call's inline input) in one request (it stores a request in
 * one turn of its loop), and ZeroMQ a frame of PL_MSG_MAX:
 * a larger submit goes in several requests, an array larger than one
 * request may make in slices that append to it.  The CLI (pilot submit)
 * and libpilot (pilot_submit()) both send through here.
 */
#ifndef PL_CLIENT_SUBMIT_H
#define PL_CLIENT_SUBMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "client/conn.h"
#include "proto/error.h"
#include "proto/spec.h"

/* Where a submit stopped. */
struct pl_submit_fail {
    size_t off, m;     /* the failing request held specs [off, off + m) */
    bool slice;        /* ... as a slice of spec 'off' (an array sent in
                          parts, or a retry_failed) */
    bool bad_reply;    /* pilotd answered, but without ids (EPROTO) */
};

/* Called after each request with the ids so far and the tasks in all. */
typedef void (*pl_submit_progress_f)(size_t done, uint64_t total,
                                     void *arg);

/* The tasks 'n' specs make (each array's elements; the indexes a retry
 * makes are pilotd's to choose: at most its range). */
uint64_t pl_submit_tasks(const struct pl_spec *specs, size_t n);

/* Send the 'n' specs (borrowed, each passed pl_spec_check()) over
 * 'conn' in as few requests as pilotd takes, each with the watch token
 * 'watch' (NULL: none: the tasks join that watch as they are made);
 * their ids are appended to
 * 'ids' (a JSON array) in the order of the specs, an array's every
 * element.  'progress' (may be NULL) is called after each request.
 * 0, or -1 with errno and errp set (pilotd's refusal, ETIMEDOUT,
 * ENOTCONN...) and *fail saying which request failed; 'ids' then holds
 * those of the requests queued before it: they are not undone. */
int pl_submit_specs(struct pl_conn *conn, const struct pl_spec *specs,
                    size_t n, const char *watch, json_t *ids, pl_submit_progress_f progress,
                    void *arg, struct pl_submit_fail *fail,
                    struct pl_error *errp);

#endif /* !PL_CLIENT_SUBMIT_H */
