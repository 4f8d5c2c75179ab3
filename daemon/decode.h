/* daemon/decode.h - the bodies pilotd receives, decoded and checked */
#ifndef PL_DAEMON_DECODE_H
#define PL_DAEMON_DECODE_H

#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>

#include "proto/error.h"

/* The decoders sit apart from the handlers that act on what they return,
 * so that tests/fuzz/ runs the very code that reads a peer's input
 * without a database, sockets or a loop.  Each checks every field
 * (docs/protocol.md) and changes nothing outside its output. */

/* One dependency of a spec: a task id, or the latest task of a name. */
struct pl_dep {
    uint64_t id;                        /* 0 when 'name' is given */
    char *name;                         /* owned, or NULL */
    bool any;                           /* any end will do, not only done */
    bool elem;                          /* element 'index' of array 'id' */
    uint64_t index;
};

#define PL_MAX_AFTER 10000              /* dependencies of one spec */
#define PL_MAX_ARRAY 1000000            /* elements of one array */

/* One task spec of a submit request (docs/protocol.md, "A task spec").
 * Every pointer is owned by the spec. */
struct pl_spec {
    char *name, *cwd, *comm, *launcher; /* NULL when absent */
    char **argv;                        /* at least one, first not empty */
    char **env;                         /* KEY=VALUE, or NULL: none */
    uint64_t ranks, cpr, gpr, retries, nodes, rpn;
    bool exclusive;
    double timeout;                     /* finite, >= 0 */
    struct pl_dep *after;               /* 'nafter' of them, or NULL */
    uint32_t nafter;
    bool array;                         /* an array: astart..aend by astep */
    uint64_t astart, aend, astep;
    int64_t priority;                   /* higher first; default 0 */
    char **tags;                        /* "KEY=VALUE", or NULL: none */
    uint64_t retry;                     /* retry_failed: that array's
                                           failed elements only; 0: no */
    uint64_t *index;                    /* retry: the indexes to make
                                           (set by pilotd), 'nindex' */
    uint64_t nindex;
};

#define PL_MAX_PRIORITY 1000000         /* |priority| */
#define PL_MAX_TAGS 32                  /* tags of one task */

/* Elements of the array of 's' (1 when it is not one; with retry, the
 * indexes pilotd chose). */
uint64_t pl_spec_count(const struct pl_spec *s);

/* Decode and check spec 'o'.  Returns 0, or -1 with errp set for a
 * person (errno EPROTO: not the right types; EINVAL: a value out of its
 * rules; ENOMEM) and 's' cleared.  The fit against the pilot's nodes is
 * the caller's. */
int pl_spec_decode(const msgpack_object *o, struct pl_spec *s,
                   struct pl_error *errp);
/* Free what 's' holds and zero it. */
void pl_spec_clear(struct pl_spec *s);

/* The body of an agent's register (docs/protocol.md, 301). */
/* Runs on lost nodes a task may survive when its spec does not say. */
#define PL_DEFAULT_RETRIES 2

struct pl_agent_reg {
    char *node;         /* 1..63 bytes of [A-Za-z0-9._-] */
    uint64_t pid;       /* 0 when absent */
    uint64_t *cpu;      /* CPU ids, 1..4096 of them */
    uint32_t ncpu;
    char **gpus;        /* GPU ids, or NULL: none */
};

/* Decode and check a register body.  Returns 0, or -1 with errp set
 * (errno EPROTO or ENOMEM) and 'r' cleared. */
int pl_agent_reg_decode(const msgpack_object *body, struct pl_agent_reg *r,
                        struct pl_error *errp);
void pl_agent_reg_clear(struct pl_agent_reg *r);

/* One entry of an agent's events (docs/protocol.md, 303). */
struct pl_agent_event {
    uint64_t id, attempt, rank;
    char *state;        /* as sent: the caller parses it */
    double time;        /* 0 when absent; may be anything the agent sent */
    int64_t exit_code;  /* -1 when absent */
    int64_t signal;     /* -1 when absent */
    bool has_rss;
    uint64_t maxrss_kb; /* when has_rss */
    char *error;        /* NULL when absent */
};

/* Decode and check event 'ev'.  Returns 0, or -1 with errp set (errno
 * EPROTO or ENOMEM) and 'e' cleared. */
int pl_agent_event_decode(const msgpack_object *ev, struct pl_agent_event *e,
                          struct pl_error *errp);
void pl_agent_event_clear(struct pl_agent_event *e);

#endif /* !PL_DAEMON_DECODE_H */
