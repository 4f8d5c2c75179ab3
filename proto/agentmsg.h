/* proto/agentmsg.h - what pilotd and its agents say to each other, but RUN
 *
 * Each message has its encoder (what the sender calls) and its decoder
 * (what the receiver calls, checking every field before anything acts
 * on it): docs/protocol.md, 201-207 and 301-304.  RUN is proto/run.h.
 */
#ifndef PL_PROTO_AGENTMSG_H
#define PL_PROTO_AGENTMSG_H

#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>

#include "proto/error.h"
#include "proto/msg.h"
#include "proto/usage.h"

/* A node's name, as it registers: it goes into logs, the database and
 * the RUN entries' 'nodelist' and 'hosts', whose readers refuse commas,
 * colons and spaces: 1..63 of a host name's characters (and Slurm's
 * '_'). */
#define PL_NODE_NAME_MAX 63
bool pl_node_name_ok(const char *s);
/* A GPU id (SLURM_STEP_GPUS) goes into comma- and semicolon-joined lists
 * (status, 'rank_gpus'): 1..64 printable bytes, neither ',' nor ';'. */
#define PL_GPU_ID_MAX 64
bool pl_gpu_id_ok(const char *s);

#define PL_REG_MAX_CPUS 4096          /* CPU ids an agent registers */
#define PL_REG_MAX_CPU_ID (1 << 20)
#define PL_REG_MAX_GPUS 64
#define PL_REG_MAX_HELD (1 << 20)     /* 'running' and 'ended' entries */
#define PL_EVENTS_MAX 1000000         /* events in one EVENTS */
#define PL_INSTANCE_MAX 95            /* bytes of a pilotd's instance */
#define PL_HEARTBEAT_MAX 3600.0       /* s between heartbeats */
#define PL_KILL_GRACE_MAX 1e6         /* s from SIGTERM to SIGKILL */

/* One rank an agent runs: task, attempt, rank. */
struct pl_held {
    uint64_t id, attempt, rank;
    uint64_t *cores;    /* a prefetched rank's CPU ids (protocol 13: its
                           'running' may not have reached pilotd); owned
                           when decoded, borrowed when encoded; NULL:
                           none said */
    uint32_t ncores;
};

/* One state change of a rank (303, and the 'ended' of a REGISTER).
 * Absent numbers are -1; a decoded one has exit_code within int32,
 * signal within 0..255 and time finite and > 0, or else -1 (0 for the
 * time: the receiver's clock stands in), and an error of valid UTF-8
 * (other bytes become '?'). */
struct pl_event {
    uint64_t id, attempt, rank;
    int state;          /* enum pl_state */
    double time;        /* s since the epoch */
    int64_t pid;        /* -1: none */
    int64_t exit_code;
    int64_t signal;
    int64_t maxrss_kb;
    struct pl_usage use; /* CPU and GPU figures of an end; fields
                            cpu_user, cpu_sys, gpu_util, gpu_mem_mb,
                            gpu_power_w, each absent when not measured
                            (a decoded out-of-range one is refused) */
    char *error;        /* NULL, or owned (decoded) / borrowed (encoded) */
    uint64_t *cores;    /* 'running' of a prefetched rank: the CPU ids
                           it was started on (owned, 'ncores'), or NULL */
    uint32_t ncores;
    bool lost;          /* a pool task's rank ended with its worker, by
                           no doing of its own (the pool's job went down
                           under it): the task runs again */
    /* a Python call's end (docs/python-reference.md): what it returned or raised,
     * pickled, inline or in a file; all owned like 'error' */
    int result_status;  /* enum pl_pyr: PL_PYR_NONE when there is none */
    unsigned char *result; /* 'nresult' <= PL_PY_RESULT_INLINE, or NULL */
    size_t nresult;
    char *result_file;  /* or the file that holds it */
    int64_t result_size; /* its bytes; -1: no result */
    char *result_repr;  /* repr() of the value, at most PL_PYR_REPR_MAX
                           bytes of UTF-8, or NULL */
};

/* What a Python call's result is. */
enum pl_pyr {
    PL_PYR_NONE = 0,
    PL_PYR_OK,          /* the function's value */
    PL_PYR_RAISED,      /* (exception, traceback text) */
};
#define PL_PYR_REPR_MAX 1024
/* "ok", "raised" (NULL for another), and back (-1). */
const char *pl_pyr_name(int status);
int pl_pyr_parse(const char *s);

/* An event with nothing but 'id', 'attempt', 'rank', 'state' and
 * 'time' set. */
void pl_event_init(struct pl_event *e, uint64_t id, uint64_t attempt,
                   uint64_t rank, int state, double time);
/* Pack 'e' as one map value. */
void pl_event_encode(struct pl_wbuf *w, const struct pl_event *e);
/* 0, or -1 with errp set (errno EPROTO or ENOMEM) and 'e' cleared. */
int pl_event_decode(const msgpack_object *o, struct pl_event *e,
                    struct pl_error *errp);
void pl_event_clear(struct pl_event *e);

/* EVENTS: pl_events_begin() then exactly 'n' pl_event_encode(). */
void pl_events_begin(struct pl_wbuf *w, uint64_t seq, uint32_t n);
/* Its entries (borrowed), each for pl_event_decode().  0, or -1. */
int pl_events_decode(const msgpack_object *body,
                     const msgpack_object **entries, struct pl_error *errp);

/* REGISTER: who the agent is, what it runs, what ended while no pilotd
 * stored it. */
struct pl_register {
    char *node;
    uint64_t pid;       /* 0 when absent */
    uint64_t *cpu;      /* CPU ids, 1..PL_REG_MAX_CPUS of them, unique */
    uint32_t ncpu;
    char **gpus;        /* GPU ids, unique, or NULL: none */
    uint64_t last_run;  /* the seq of the last RUN read from this pilotd */
    struct pl_held *running;
    uint32_t nrunning;
    struct pl_event *ended;
    uint32_t nended;
    /* protocol 12: the agent's Slurm job (a grown allocation's is not
     * pilotd's own: docs/grow.md) and that job's end */
    uint64_t job;       /* 0: none or not told */
    double job_end;     /* s since the epoch; 0: unknown */
};

/* Every pointer of 'r' is borrowed. */
void pl_register_encode(struct pl_wbuf *w, uint64_t seq,
                        const struct pl_register *r);
/* Into 'r', which then owns everything (pl_register_clear()).  0, or
 * -1 with errp set (errno EPROTO or ENOMEM) and 'r' cleared. */
int pl_register_decode(const msgpack_object *body, struct pl_register *r,
                       struct pl_error *errp);
void pl_register_clear(struct pl_register *r);
/* Whether the agent of 'r' says rank 'rank' of 'attempt' of task 'id'
 * runs there, or ended while no pilotd stored it. */
bool pl_register_runs(const struct pl_register *r, uint64_t id,
                      uint64_t attempt, uint64_t rank);
bool pl_register_ended(const struct pl_register *r, uint64_t id,
                       uint64_t attempt, uint64_t rank);

/* WELCOME: the answer to REGISTER 'seq'. */
struct pl_welcome {
    char *node;         /* what pilotd calls the agent's node */
    char *instance;     /* which pilotd: a new one numbers RUNs from 1 */
    double heartbeat;   /* s, in (0, PL_HEARTBEAT_MAX] */
};

void pl_welcome_encode(struct pl_wbuf *w, uint64_t seq,
                       const struct pl_welcome *wl);
int pl_welcome_decode(const msgpack_object *body, struct pl_welcome *wl,
                      struct pl_error *errp);
void pl_welcome_clear(struct pl_welcome *wl);

/* PULL: the agent has room. */
struct pl_pull {
    uint64_t free_cores, free_gpus;
};

void pl_pull_encode(struct pl_wbuf *w, uint64_t seq, const struct pl_pull *p);
int pl_pull_decode(const msgpack_object *body, struct pl_pull *p,
                   struct pl_error *errp);

/* ACK: the EVENTS message 'acked' is committed. */
void pl_ack_encode(struct pl_wbuf *w, uint64_t acked);
int pl_ack_decode(const msgpack_object *body, uint64_t *acked,
                  struct pl_error *errp);

/* GOT: the agent has read every RUN and KILL up to 'seq' (they are
 * numbered together, per agent, from 1 for each pilotd instance). */
void pl_got_encode(struct pl_wbuf *w, uint64_t seq, uint64_t got);
int pl_got_decode(const msgpack_object *body, uint64_t *got,
                  struct pl_error *errp);

/* KILL: stop every rank of an attempt on the node, or only 'rank'. */
struct pl_kill {
    uint64_t id, attempt;
    bool one;           /* only 'rank' */
    uint64_t rank;
    double grace;       /* s from SIGTERM to SIGKILL */
    bool queued_only;   /* only a prefetched entry the agent holds and
                           has not started: it ends 'canceled' with
                           'lost' (taken back: pilotd queues it again) */
};

/* 'seq' numbers it with the RUNs to that agent (GOT acknowledges both). */
void pl_kill_encode(struct pl_wbuf *w, uint64_t seq, const struct pl_kill *k);
int pl_kill_decode(const msgpack_object *body, struct pl_kill *k,
                   struct pl_error *errp);

/* POOL_READY: workers of a pool's job on the node said HELLO to their
 * agent (proto/poolmsg.h): their world ranks. */
struct pl_pool_ready {
    uint64_t job, attempt;     /* the pool's job */
    uint64_t *ranks;           /* owned (decoded), 1..PL_POOL_MAX_WORKERS */
    uint32_t nranks;
};
void pl_pool_ready_encode(struct pl_wbuf *w, uint64_t seq,
                          const struct pl_pool_ready *p);
int pl_pool_ready_decode(const msgpack_object *body, struct pl_pool_ready *p,
                         struct pl_error *errp);
void pl_pool_ready_clear(struct pl_pool_ready *p);

/* The messages without a body: EXIT, REREGISTER, PING (pilotd's) and
 * HEARTBEAT (the agent's). */
void pl_bare_encode(struct pl_wbuf *w, int type, uint64_t seq);

#endif /* !PL_PROTO_AGENTMSG_H */
