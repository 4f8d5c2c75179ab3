/* proto/msg.h - wire messages: envelope, types, checked field access */
#ifndef PL_PROTO_MSG_H
#define PL_PROTO_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "proto/error.h"
#include "proto/strv.h"

/* Every message is a msgpack array [version, type, seq, body] where body
 * is a map with string keys.  See docs/protocol.md.
 * N.B. bump PL_PROTO_VERSION if any of the types or fields change. */
#define PL_PROTO_VERSION 13
/* pilot's release, printed by the three programs' --version */
#define PL_VERSION "0.1.0"

/* Largest message we accept (ZMQ_MAXMSGSIZE on every socket). */
#define PL_MSG_MAX (64 * 1024 * 1024)

/* Most msgpack objects (each value, key, array and map counts one) in a
 * message pl_msg_decode() accepts.  msgpack-c builds a tree of 24 bytes
 * an object, at 0.1-0.2 us each on a loaded 2-vCPU VM: a frame of
 * PL_MSG_MAX nils cost pilotd's only thread 8 s and 1.5 GiB.  4 Mi
 * objects: at most 96 MiB and ~0.7 s, and room for a submit of 100,000
 * specs of 40 objects each (the CLI's spec of 3 arguments is 14). */
#define PL_MSG_MAX_OBJECTS (4 * 1024 * 1024)

enum pl_msg_type {
    PL_MSG_REPLY = 1, /* any request's answer: errno, error, data */
    PL_MSG_ENDS = 2,  /* pushed to a watch's client: task ends
                         (proto/watchmsg.h) */

    /* client -> daemon */
    PL_MSG_SUBMIT = 101,
    PL_MSG_LIST = 102,
    PL_MSG_SHOW = 103,
    PL_MSG_CANCEL = 104,
    PL_MSG_STATUS = 105,
    PL_MSG_SHUTDOWN = 106,
    PL_MSG_COUNTS = 107,
    PL_MSG_KEYS = 108,       /* read the allow-list again (keys/allow/) */
    PL_MSG_POOL_START = 109, /* start a pool of workers (docs/pool.md) */
    PL_MSG_POOL_STOP = 110,
    PL_MSG_POOL_LIST = 111,
    PL_MSG_WATCH = 112,      /* subscribe to task ends (proto/watchmsg.h) */
    PL_MSG_UNWATCH = 113,
    PL_MSG_RESULTS = 114,    /* Python calls' results, many at once */
    PL_MSG_EXPLAIN = 115,    /* why a task does not run (yet) */
    PL_MSG_VET_REQ = 117,    /* vet nodes again (proto/vetmsg.h) */
    PL_MSG_CORDON = 118,     /* cordon or uncordon a node */
    PL_MSG_TIMELINE = 116,   /* a report's tasks and ranks (tlmsg.h) */
    PL_MSG_GROW = 119,       /* a Slurm job of agents joins (allocmsg.h) */
    PL_MSG_SHRINK = 120,     /* release allocations (idle ones, or one) */
    PL_MSG_ALLOCS = 121,     /* list the allocations */

    /* daemon -> agent */
    PL_MSG_WELCOME = 201,
    PL_MSG_RUN = 202,
    PL_MSG_KILL = 203,
    PL_MSG_EXIT = 204,
    PL_MSG_ACK = 205,        /* an EVENTS message is committed: its seq */
    PL_MSG_REREGISTER = 206, /* pilotd does not know this agent: register */
    PL_MSG_PING = 207,       /* pilotd's heartbeat */
    PL_MSG_VET = 208,        /* run the node's checks (proto/vetmsg.h) */

    /* agent -> daemon */
    PL_MSG_REGISTER = 301,
    PL_MSG_PULL = 302,
    PL_MSG_EVENTS = 303,
    PL_MSG_HEARTBEAT = 304,
    PL_MSG_GOT = 305,        /* every RUN and KILL up to its seq was read */
    PL_MSG_POOL_READY = 306, /* a pool's workers on the node said HELLO */
    PL_MSG_VET_RESULT = 307, /* the node's checks' outcome */

    /* a pool worker <-> its node's agent (proto/poolmsg.h) */
    PL_MSG_W_HELLO = 401,
    PL_MSG_W_CALL = 402,
    PL_MSG_W_ENTERED = 403,
    PL_MSG_W_RETURN = 404,
    PL_MSG_W_CRASH = 405,

    /* a warm Python worker <-> its agent (proto/pywmsg.h): not msgpack,
     * a JSON header and raw bytes, so that the worker needs only
     * Python's standard library */
    PL_MSG_PY_HELLO = 406,
    PL_MSG_PY_CALL = 407,
    PL_MSG_PY_RESULT = 408,
    PL_MSG_PY_ENTERED = 409,
};

/* Name of a type for logs ("submit"), or "unknown". */
const char *pl_msg_type_name(int type);

/* A received message.  The unpacked zone owns the objects, but strings
 * point into the buffer that was decoded (msgpack-c does not copy them):
 * N.B. that buffer must outlive the message, or be handed to it in 'own'
 * (freed by pl_msg_release()). */
struct pl_msg {
    int type;
    uint64_t seq;
    const msgpack_object *body; /* a map; borrowed from 'up' */
    msgpack_unpacked up;
    void *own;                  /* malloc'd buffer released with it */
};

/* Decode and check the envelope of 'len' bytes at 'buf': version, a known
 * type, a seq, a map body whose keys are all strings.  On success 'm'
 * must be released with pl_msg_release(); on failure there is nothing
 * to release.  Returns 0, or -1 with errp set (errno EPROTO). */
int pl_msg_decode(const void *buf, size_t len, struct pl_msg *m,
                  struct pl_error *errp);
/* pl_msg_decode() with a budget of 'max_objects' instead of
 * PL_MSG_MAX_OBJECTS: the CLI reads pilotd's replies (a listing of
 * 100,000 tasks is more) with PL_MSG_MAX, that is no budget beyond the
 * size. */
int pl_msg_decode_max(const void *buf, size_t len, uint64_t max_objects,
                      struct pl_msg *m, struct pl_error *errp);
void pl_msg_release(struct pl_msg *m);

/* The version and seq of a message pl_msg_decode() refused, when the
 * head of its envelope can still be read (an array of 3 or more whose
 * first three are unsigned integers; the rest is not read): so that a
 * peer of another version gets an answer it can match to its request.
 * 0, or -1 (EPROTO). */
int pl_msg_peek(const void *buf, size_t len, uint64_t *version,
                uint64_t *seq);

/* Checked field access on a map.  Each returns 1 if the key is present
 * with the right type, 0 if absent (and not 'required'), or -1 with errp
 * set (EPROTO) if it has the wrong type, is out of range, or is missing
 * and required.  Outputs are left alone unless 1 is returned. */
int pl_mp_uint(const msgpack_object *map, const char *key, bool required,
               uint64_t max, uint64_t *v, struct pl_error *errp);
int pl_mp_int(const msgpack_object *map, const char *key, bool required,
              int64_t *v, struct pl_error *errp);
int pl_mp_double(const msgpack_object *map, const char *key, bool required,
                 double *v, struct pl_error *errp);
int pl_mp_bool(const msgpack_object *map, const char *key, bool required,
               bool *v, struct pl_error *errp);
/* A string without NUL bytes of at most 'maxlen' bytes; *s is a new
 * NUL-terminated copy the caller owns. */
int pl_mp_str(const msgpack_object *map, const char *key, bool required,
              size_t maxlen, char **s, struct pl_error *errp);
/* Bytes (msgpack bin) of at most 'maxlen' bytes: *p and *len borrow
 * them from the message. */
int pl_mp_bin(const msgpack_object *map, const char *key, bool required,
              size_t maxlen, const unsigned char **p, size_t *len,
              struct pl_error *errp);
/* An array of at most 'maxn' elements; *arr is borrowed. */
int pl_mp_array(const msgpack_object *map, const char *key, bool required,
                uint32_t maxn, const msgpack_object **arr,
                struct pl_error *errp);
/* A map; *out is borrowed. */
int pl_mp_map(const msgpack_object *map, const char *key, bool required,
              const msgpack_object **out, struct pl_error *errp);
/* An array of strings as a new NULL-terminated vector the caller frees
 * with pl_strv_free(). 'minn' elements at least. */
int pl_mp_strv(const msgpack_object *map, const char *key, bool required,
               uint32_t minn, uint32_t maxn, size_t maxlen, char ***v,
               struct pl_error *errp);
/* An array of unsigned integers <= 'max' as a new array (free()). */
int pl_mp_uintv(const msgpack_object *map, const char *key, bool required,
                uint32_t maxn, uint64_t max, uint64_t **v, uint32_t *n,
                struct pl_error *errp);
/* The value of 'key' in 'map', or NULL.  Borrowed. */
const msgpack_object *pl_mp_get(const msgpack_object *map, const char *key);
/* A copy of a msgpack string object (no NUL bytes), or NULL (EPROTO). */
char *pl_mp_strdup(const msgpack_object *o, size_t maxlen);

/* Building a message.  pl_wbuf_init() packs the envelope and starts the
 * body map; the fields then go in with the pl_wm_*() writers on
 * &w->body.  A map's entry count is the number of pairs its writers
 * wrote: its header is a map32 that each writer updates in place, so no
 * count is ever given by hand (msgpack readers take a map32 of any
 * size).  The buffer is owned by 'w'.  Out of memory, msgpack-c's
 * sbuffer aborts, as for any other write. */
struct pl_wbuf;

struct pl_wmap {
    struct pl_wbuf *w;
    size_t at;                  /* offset of the map32 header in w->sb */
    uint32_t n;                 /* pairs written */
};

struct pl_wbuf {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct pl_wmap body;        /* the envelope's body map */
};

void pl_wbuf_init(struct pl_wbuf *w, int type, uint64_t seq);
void pl_wbuf_destroy(struct pl_wbuf *w);

/* A new map at the end of 'w' (a value: in an array, or after
 * pl_wm_key()). */
void pl_wmap_begin(struct pl_wbuf *w, struct pl_wmap *m);
/* Write 'key' into 'm' and count the pair: the caller packs exactly one
 * value next, on m->w->pk.  Returns that packer. */
msgpack_packer *pl_wm_key(struct pl_wmap *m, const char *key);
void pl_wm_str(struct pl_wmap *m, const char *key, const char *val);
void pl_wm_uint(struct pl_wmap *m, const char *key, uint64_t val);
void pl_wm_int(struct pl_wmap *m, const char *key, int64_t val);
void pl_wm_double(struct pl_wmap *m, const char *key, double val);
void pl_wm_bool(struct pl_wmap *m, const char *key, bool val);
void pl_wm_strv(struct pl_wmap *m, const char *key, char *const *v);
/* 'len' bytes at 'p' as a msgpack bin. */
void pl_wm_bin(struct pl_wmap *m, const char *key, const void *p, size_t len);
void pl_wm_uintv(struct pl_wmap *m, const char *key, const uint64_t *v,
                 uint32_t n);
/* A value: a string (NULL packs nil). */
void pl_w_str(msgpack_packer *pk, const char *s);

/* A reply to request 'seq': errno 0 and, after this call, exactly one
 * value packed by the caller (the "data"), or an error (errnum != 0)
 * with 'text' and nil data. */
void pl_wbuf_reply(struct pl_wbuf *w, uint64_t seq, int errnum,
                   const char *text);
/* Read a reply's body: *errnum (0: success), *text (NULL, or a new
 * string the caller frees: what went wrong, at most 4096 bytes) and
 * *data (borrowed; NULL when absent).  0, or -1 with errp (EPROTO). */
int pl_reply_decode(const msgpack_object *body, int64_t *errnum,
                    char **text, const msgpack_object **data,
                    struct pl_error *errp);

#endif /* !PL_PROTO_MSG_H */
