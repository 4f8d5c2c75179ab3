/* proto/allocmsg.h - allocations that join a running pilot: the client's
 * requests GROW, SHRINK, ALLOCS and the auto-grow settings
 *
 * docs/protocol.md (119-121) and docs/grow.md.
 */
#ifndef PL_PROTO_ALLOCMSG_H
#define PL_PROTO_ALLOCMSG_H

#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>

#include "proto/error.h"
#include "proto/msg.h"

#define PL_ALLOC_MAX_NODES 100000  /* nodes one allocation asks for */
#define PL_ALLOC_TIME_MAX 31       /* bytes of a Slurm --time */
#define PL_ALLOC_PART_MAX 63       /* bytes of a partition name */

/* A Slurm --time value: 1..PL_ALLOC_TIME_MAX of 0-9 ':' '-' (minutes,
 * M:S, H:M:S, D-H, D-H:M, D-H:M:S). */
bool pl_alloc_time_ok(const char *s);
/* A partition name: 1..PL_ALLOC_PART_MAX of A-Z a-z 0-9 _ . - ','. */
bool pl_alloc_part_ok(const char *s);
/* Seconds of a Slurm --time value (-1: not one). */
double pl_alloc_time_secs(const char *s);

/* GROW: one Slurm job of agents. */
struct pl_grow_req {
    uint32_t nodes;          /* >= 1 */
    char *time;              /* NULL: the pilot's own default */
    char *partition;         /* NULL: Slurm's default */
    double drain;            /* s before its end its nodes drain; < 0:
                                the default */
};
void pl_grow_req_encode(struct pl_wbuf *w, uint64_t seq,
                        const struct pl_grow_req *q);
/* Into 'q' (pl_grow_req_clear()).  0, or -1 with errp (EPROTO, ENOMEM). */
int pl_grow_req_decode(const msgpack_object *body, struct pl_grow_req *q,
                       struct pl_error *errp);
void pl_grow_req_clear(struct pl_grow_req *q);

/* SHRINK: the allocations idle at least 'idle' s, or allocation 'alloc'
 * (exactly one of them). */
struct pl_shrink_req {
    double idle;             /* < 0: not given */
    uint64_t alloc;          /* 0: not given */
};
void pl_shrink_req_encode(struct pl_wbuf *w, uint64_t seq,
                          const struct pl_shrink_req *q);
int pl_shrink_req_decode(const msgpack_object *body, struct pl_shrink_req *q,
                         struct pl_error *errp);

/* pilot up --grow max=K,idle=D[,nodes=N][,time=T][,partition=P]
 * [,pending=M][,drain=D]: pilotd grows itself (docs/grow.md). */
struct pl_grow_conf {
    uint32_t max;            /* nodes the allocations hold at most */
    double idle;             /* s an allocation may idle, then released */
    uint32_t nodes;          /* nodes an allocation asks; 0: from the
                                queue */
    uint32_t pending;        /* allocations waiting in Slurm at most */
    double drain;            /* s before its end an allocation drains */
    char time[PL_ALLOC_TIME_MAX + 1];      /* "": the default */
    char partition[PL_ALLOC_PART_MAX + 1]; /* "": Slurm's default */
};
#define PL_GROW_IDLE 300.0     /* default idle= */
#define PL_GROW_PENDING 1      /* default pending= */
#define PL_GROW_DRAIN 60.0     /* default drain= (and grow --drain) */
/* Parse 's' into 'c'.  Durations are seconds, or a number with s, m, h.
 * 0, or -1 with errp (EINVAL). */
int pl_grow_conf_parse(const char *s, struct pl_grow_conf *c,
                       struct pl_error *errp);

#endif /* !PL_PROTO_ALLOCMSG_H */
