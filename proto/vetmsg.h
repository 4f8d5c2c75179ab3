/* proto/vetmsg.h - node vetting on the wire: its checks' settings (VET,
 * 208), a node's result (VET_RESULT, 307), and the client's VET (117) and
 * CORDON (118) requests
 *
 * What the checks are and what their figures mean: docs/observability.md,
 * "Node vetting".  The settings come from a vet.yaml (proto/vetconf.h);
 * pilotd sends them in every VET, so that the agent reads no file of its
 * own and every agent of a pilot checks the same things.
 */
#ifndef PL_PROTO_VETMSG_H
#define PL_PROTO_VETMSG_H

#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>

#include "proto/error.h"
#include "proto/msg.h"

#define PL_VET_MAX_CHECKS 64      /* checks in one result */
#define PL_VET_MAX_PATHS 16       /* disk paths checked */
#define PL_VET_MAX_EXTERNAL 8     /* external programs */
#define PL_VET_MAX_ARGS 64        /* words of an external program's command */
#define PL_VET_NAME_MAX 32        /* bytes of a check's name */
#define PL_VET_UNIT_MAX 16        /* ... of a figure's unit */
#define PL_VET_TEXT_MAX 512       /* ... of a detail, a path, an argument */
#define PL_VET_TIMEOUT_MAX 3600.0 /* s */

/* One external check program: it prints a JSON object on stdout,
 * {"checks": [{"name", "ok", "figure", "unit", "limit", "detail"}...]},
 * whose entries join the node's result; a program that fails, times out
 * or prints no such object fails one check named after it. */
struct pl_vet_external {
    char *name;         /* [a-z0-9_-], at most PL_VET_NAME_MAX */
    char **argv;        /* NULL-terminated, at least one word */
    double timeout;     /* s */
};

/* What to check and the limits (VET's body; a vet.yaml's content).
 * Owned strings; pl_vetconf_clear(). */
struct pl_vetconf {
    double timeout;           /* s for all the node's checks together */
    bool gpus;                /* the GPUs usable are those Slurm granted */
    char *gpu_devices;        /* the device file of GPU id %s
                                 ("/dev/nvidia%s"); NULL: none checked */
    bool gpu_vetcheck;        /* granted GPUs: pilot-vetcheck gpu too */
    double gpu_min_free_pct;  /* ... its --min-free-pct */
    double gpu_max_temp;      /* ... its --max-temp, C */
    bool disk;
    bool disk_task_dir;       /* the pilot's task directory too */
    char **disk_paths;        /* NULL-terminated, may be NULL */
    uint64_t disk_min_mb;     /* free MiB, each path */
    bool memory;
    uint64_t mem_min_mb;      /* MemAvailable, MiB */
    bool cpu;
    uint64_t cpu_iterations;  /* of the compute loop, one slice */
    uint32_t cpu_slices;      /* slices on each core: the best counts */
    double cpu_max_slower;    /* % below the nodes' median that fails */
    uint32_t revet_signals;   /* ranks ended by a signal on a node ... */
    double revet_window;      /* ... within this many s: vet it again
                                 (0 signals: never) */
    struct pl_vet_external *ext;
    uint32_t next;
    bool off;                 /* enabled: false (not on the wire) */
    /* `pilot vet --net` / `--nccl` (client side, not on the wire):
     * pilot-vetcheck net / nccl as a task of the pilot */
    bool net_start, nccl_start; /* also run by `pilot up` at start-up */
    double net_max_latency;   /* us a pair may take; 0: no limit */
    double net_min_bw;        /* MB/s a pair must reach; 0: no limit */
    uint64_t net_size;        /* bytes of the bandwidth ping-pong */
    uint64_t net_iters;
    double nccl_min_busbw;    /* GB/s; 0: no limit */
    uint64_t nccl_size;
    uint64_t nccl_iters;
    double net_timeout;       /* s a net or nccl task may run */
};

void pl_vetconf_clear(struct pl_vetconf *c);

/* VET: run the checks of 'c'; 'token' comes back in the result. */
void pl_vet_encode(struct pl_wbuf *w, uint64_t seq, uint64_t token,
                   const struct pl_vetconf *c);
/* Into 'c' (cleared first; owned).  0, or -1 with errp (EPROTO, ENOMEM)
 * and nothing held. */
int pl_vet_decode(const msgpack_object *body, uint64_t *token,
                  struct pl_vetconf *c, struct pl_error *errp);

/* One check's outcome.  'figure' and 'limit' are NaN when the check has
 * none (a count that is not a number, a program that failed). */
struct pl_vet_check {
    char *name;
    bool ok;
    double figure;
    char *unit;         /* "MiB", "Mop/s", "gpus"; may be NULL */
    double limit;
    char *detail;       /* what a person reads; may be NULL */
};

/* VET_RESULT: a node's vetting. */
struct pl_vet_result {
    char *node;
    uint64_t token;     /* the VET's */
    double time;        /* when it ended, s since the epoch */
    double took;        /* s it took */
    bool ok;            /* every check ok */
    struct pl_vet_check *check;
    uint32_t ncheck;
};

void pl_vet_result_encode(struct pl_wbuf *w, uint64_t seq,
                          const struct pl_vet_result *r);
/* Into 'r' (cleared first; owned): every field type- and length-checked,
 * names of PL_VET_NAME_MAX bytes of [a-z0-9_.-], texts of valid UTF-8,
 * 'ok' true only when every check is.  0, or -1 with errp (EPROTO,
 * ENOMEM) and nothing held. */
int pl_vet_result_decode(const msgpack_object *body, struct pl_vet_result *r,
                         struct pl_error *errp);
void pl_vet_result_clear(struct pl_vet_result *r);
/* Whether 's' is a check's name: 1..PL_VET_NAME_MAX of [a-z0-9_.-]. */
bool pl_vet_name_ok(const char *s);

/* Client VET (117): vet these nodes (NULL: every node up) and answer
 * when all have. */
struct pl_vet_req {
    char **nodes;       /* NULL-terminated or NULL */
};
#define PL_VET_REQ_MAX_NODES 4096
void pl_vet_req_encode(struct pl_wbuf *w, uint64_t seq,
                       const struct pl_vet_req *q);
int pl_vet_req_decode(const msgpack_object *body, struct pl_vet_req *q,
                      struct pl_error *errp);
void pl_vet_req_clear(struct pl_vet_req *q);

/* Client CORDON (118): cordon 'node' (nothing new is placed there), or
 * with 'uncordon' take the cordon off. */
struct pl_cordon_req {
    char *node;
    char *reason;       /* may be NULL: "pilot cordon" */
    bool uncordon;
};
#define PL_CORDON_REASON_MAX 256
void pl_cordon_req_encode(struct pl_wbuf *w, uint64_t seq,
                          const struct pl_cordon_req *q);
int pl_cordon_req_decode(const msgpack_object *body, struct pl_cordon_req *q,
                         struct pl_error *errp);
void pl_cordon_req_clear(struct pl_cordon_req *q);

#endif /* !PL_PROTO_VETMSG_H */
