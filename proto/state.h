/* proto/state.h - task states and their names */
#ifndef PL_PROTO_STATE_H
#define PL_PROTO_STATE_H

#include <stdbool.h>

enum pl_state {
    PL_ST_WAITING = 1, /* dependencies not met (issue 6) */
    PL_ST_QUEUED,
    PL_ST_ASSIGNED,    /* sent to an agent, not yet started */
    PL_ST_RUNNING,
    PL_ST_DONE,
    PL_ST_FAILED,
    PL_ST_CANCELED,
    PL_ST_TIMEOUT,
};
#define PL_ST_COUNT 9 /* one past the last */

/* "queued", ... or NULL for a bad value. */
const char *pl_state_name(int st);
/* The state named 's', or -1. */
int pl_state_parse(const char *s);
bool pl_state_final(int st);

/* The end of the reason of an attempt given back before it started
 * (held under --prefetch, at 'pilot down', at a walltime drain): requeued,
 * not charged to --retries.  pilotd writes it; pilot show counts such
 * attempts by it. */
#define PL_REASON_UNSTARTED "before it started"

#endif /* !PL_PROTO_STATE_H */
