/* proto/poolmsg.h - a pool's workers and their node's agent: the local
 * socket, its frames, and the messages (401-405)
 *
 * Each agent listens on an abstract unix socket (Linux: no file; scoped
 * by the network namespace, so by the node) named from the pilot's keys
 * directory and the node's name, and admits only its own user (the
 * peer's credentials).  A pool worker connects to its node's agent,
 * says HELLO, and is then sent one CALL at a time; it answers ENTERED
 * once the task's communicator is made and the function is about to
 * run, and RETURN when it has returned.  A worker killed by a signal in
 * the function sends CRASH from its signal handler first.
 * Frames: a 4-byte big-endian length, then a message (proto/msg.h's
 * envelope) of that many bytes.  docs/pool.md, docs/protocol.md.
 */
#ifndef PL_PROTO_POOLMSG_H
#define PL_PROTO_POOLMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <msgpack.h>

#include "proto/error.h"
#include "proto/msg.h"

#define PL_POOL_MAX_WORKERS 65536   /* ranks of a pool's MPI job */
#define PL_WFRAME_MAX PL_MSG_MAX    /* bytes of one frame's message */
#define PL_POOL_PREFIX_MAX 32       /* bytes of a socket prefix, NUL too */

/* The socket prefix of the pilot whose keys directory is 'keydir':
 * "pilot-pool-" and 16 hex digits of a hash of the path.  pilotd passes
 * it to the pool's job (PILOT_POOL_SOCKET); the agents compute it from
 * their --keys. */
void pl_pool_sock_prefix(const char *keydir, char buf[PL_POOL_PREFIX_MAX]);
/* The address of the socket of node 'node' (abstract: sun_path[0] is
 * NUL) and its length for bind()/connect().  0, or -1 (ENAMETOOLONG:
 * prefix and node do not fit). */
int pl_pool_sock_addr(const char *prefix, const char *node,
                      struct sockaddr_un *sa, socklen_t *len);

/* A frame's header for a message of 'len' bytes, and the length a header
 * gives. */
void pl_wframe_header(unsigned char hdr[4], size_t len);
size_t pl_wframe_len(const unsigned char hdr[4]);

/* MPI_Comm_create_group's tag for an attempt of a task: the same on each
 * of its ranks, within the 32,767 MPI guarantees. */
int pl_wcall_tag(uint64_t id, uint64_t attempt);

/* HELLO (401), a worker's first message. */
struct pl_whello {
    char *pool;             /* the pool's name */
    uint64_t job, attempt;  /* the pool's job: task id and attempt */
    uint64_t world_rank;    /* < world_size */
    uint64_t world_size;    /* 1..PL_POOL_MAX_WORKERS */
    int64_t pid;            /* > 0 */
    bool python;            /* --py functions can run */
    char *nccl;             /* NULL: NCCL ready; else why not */
};
void pl_whello_encode(struct pl_wbuf *w, const struct pl_whello *h);
/* 0, or -1 with errp (EPROTO, ENOMEM) and 'h' cleared. */
int pl_whello_decode(const msgpack_object *body, struct pl_whello *h,
                     struct pl_error *errp);
void pl_whello_clear(struct pl_whello *h);

/* CALL (402): run one rank of a task.  A decoded one owns every pointer;
 * one filled in to be encoded may borrow them. */
struct pl_wcall {
    uint64_t id, attempt;
    uint64_t rank, size;    /* rank < size <= PL_POOL_MAX_WORKERS */
    uint64_t *group;        /* 'size' distinct world ranks: rank i of the
                               task is world rank group[i] */
    int fn;                 /* PL_FN_C or PL_FN_PY (proto/spec.h) */
    char **argv;            /* argv[0]: "LIB.so:SYMBOL" or
                               "MODULE:FUNCTION"; NULL-terminated */
    char **env;             /* KEY=VALUE set around the call, or NULL */
    char *cwd;              /* the call's working directory, or NULL */
    char *out, *err;        /* the rank's stdout and stderr files */
    int64_t array_index;    /* -1: not an array element */
};
void pl_wcall_encode(struct pl_wbuf *w, const struct pl_wcall *c);
/* 0, or -1 with errp (EPROTO, ENOMEM) and 'c' cleared. */
int pl_wcall_decode(const msgpack_object *body, struct pl_wcall *c,
                    struct pl_error *errp);
void pl_wcall_clear(struct pl_wcall *c);

/* ENTERED (403): the function is called now (its communicators made). */
struct pl_wentered {
    uint64_t id, attempt;
    double time;            /* s since the epoch */
};
void pl_wentered_encode(struct pl_wbuf *w, const struct pl_wentered *e);
int pl_wentered_decode(const msgpack_object *body, struct pl_wentered *e,
                       struct pl_error *errp);

/* RETURN (404): the function returned 'code', or the call failed before
 * it ran ('error' says why: no library, no symbol...; code is then 127
 * or 126, as a shell's). */
struct pl_wreturn {
    uint64_t id, attempt;
    int64_t code;           /* 0..255 */
    char *error;            /* NULL, or owned (decoded) */
    double time;
};
void pl_wreturn_encode(struct pl_wbuf *w, const struct pl_wreturn *r);
int pl_wreturn_decode(const msgpack_object *body, struct pl_wreturn *r,
                      struct pl_error *errp);
void pl_wreturn_clear(struct pl_wreturn *r);

/* CRASH (405): the worker is dying in the current call, of 'signal'
 * (1..64), or 0: the function called exit().  A worker encodes these
 * before any call, to write from a signal handler. */
void pl_wcrash_encode(struct pl_wbuf *w, int64_t signal);
int pl_wcrash_decode(const msgpack_object *body, int64_t *signal,
                     struct pl_error *errp);

#endif /* !PL_PROTO_POOLMSG_H */
