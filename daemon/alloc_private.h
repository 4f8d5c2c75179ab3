/* daemon/alloc_private.h - what alloc.c and alloc_req.c share: an
 * allocation and the table of them (no other module includes this) */
#ifndef PL_DAEMON_ALLOC_PRIVATE_H
#define PL_DAEMON_ALLOC_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "daemon/alloc.h"
#include "daemon/daemon_private.h"
#include "proto/allocmsg.h"
#include "proto/pilotdir.h"

enum alloc_state {
    A_PENDING = 1,           /* sbatch runs, or the job waits in Slurm */
    A_RUNNING,
    A_DRAINING,
    A_ENDED,
};


struct pl_alloc {
    struct pl_daemon *d;
    uint64_t id;
    long job;                /* 0 while sbatch runs */
    int state;
    bool automatic;
    uint32_t nodes;          /* asked */
    char time[PL_ALLOC_TIME_MAX + 1];
    char partition[PL_ALLOC_PART_MAX + 1];
    double drain;            /* s before the end its nodes drain */
    double submitted, started, ended; /* pl_now(); 0: not yet */
    double end_time;         /* the job's end (s since the epoch); 0 */
    double idle_since;       /* pl_mono(): all its nodes idle since; 0 */
    double checked;          /* pl_mono() of the last look at its job */
    bool joined;             /* an agent of it registered (ever) */
    char **names;            /* its nodes, as they joined (owned) */
    char why[128];           /* why it drains, or ended */
    struct pl_child *sbatch; /* while it runs */
    char out[PL_PATH_MAX + 64]; /* sbatch's output */
    /* the GROW that waits for sbatch's answer */
    bool reply;
    unsigned char rid[256];
    size_t ridlen;
    uint64_t seq;
};

struct pl_allocs {
    struct pl_alloc **v;
    size_t n, cap;
    uint64_t next;
    bool grow;               /* pilot up --grow */
    struct pl_grow_conf conf;
    unsigned failures;       /* sbatch failures in a row (auto) */
    double retry_at;         /* pl_mono() before which none is asked */
    double queued_since;     /* pl_mono(): the queue waits since; 0 */
    double scanned;          /* pl_mono() of the last look at it */
    struct pl_alloc_want *want; /* the queue's shape (scratch) */
    size_t nwant, capwant;
};

extern const char *const alloc_state_names[]; /* by enum alloc_state */

/* Whether 'a' has not ended. */
bool alloc_live(const struct pl_alloc *a);
/* Allocation 'id', or NULL. */
struct pl_alloc *alloc_find(const struct pl_allocs *s, uint64_t id);
/* A new one, pending, numbered (NULL: out of memory). */
struct pl_alloc *alloc_new(struct pl_daemon *d);
/* Node 'name' joined it.  0, or -1 (ENOMEM). */
int alloc_add_name(struct pl_alloc *a, const char *name);
/* Its object for status, ALLOCS and the meta row (new reference). */
json_t *alloc_json(const struct pl_alloc *a);
/* Write it into the open transaction (meta row alloc.N). */
void alloc_store(struct pl_alloc *a);
/* Set its state ('why': its reason, or NULL), logged and stored. */
void alloc_set_state(struct pl_alloc *a, int state, const char *why);
/* Its nodes leave (their tasks are queued again, not charged), its job
 * is cancelled, it has ended ('why'). */
void alloc_leave(struct pl_alloc *a, const char *why);
/* A new allocation of 'nodes': its script written, sbatch started (the
 * job id comes in its exit callback).  NULL with errp. */
struct pl_alloc *alloc_submit(struct pl_daemon *d, uint32_t nodes,
                              const char *time, const char *partition,
                              double drain, bool automatic,
                              struct pl_error *errp);

#endif /* !PL_DAEMON_ALLOC_PRIVATE_H */
