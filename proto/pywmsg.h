/* proto/pywmsg.h - a warm Python worker and its agent: frames, messages
 *
 * The worker (python/pilot/_pyworker.py) is pure Python, so that it runs
 * under any interpreter a user brings (a venv's, conda's) with nothing
 * but the standard library and cloudpickle: its frames are not msgpack
 * but a 4-byte big-endian length (of the rest), a 4-byte big-endian
 * header length, a JSON object (the header) and raw bytes (the payload).
 * The header's "kind" is the message's type (406-409).  The agent
 * decodes what a worker sends with every length and type checked: the
 * function it runs may write anything to the worker's socket, and the
 * agent must survive it (docs/protocol.md, "A warm Python worker").
 */
#ifndef PL_PROTO_PYWMSG_H
#define PL_PROTO_PYWMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "proto/error.h"
#include "proto/run.h"

/* A worker's header is at most this long (its longest field, a reason,
 * is cut at 4 KiB by the worker), and a frame from it holds at most an
 * inline result besides. */
#define PL_PYW_HDR_MAX (64 * 1024)
#define PL_PYW_FRAME_MAX (PL_PYW_HDR_MAX + 64 * 1024 + 4)
#define PL_PYW_REASON_MAX 4096   /* bytes of a result's 'reason' */
#define PL_PYW_VERSION_MAX 64    /* bytes of a hello's 'version' */

/* The length the 4 bytes at 'p' give: the bytes of the frame after them. */
size_t pl_pyw_frame_len(const unsigned char *p);

/* One message: its kind (PL_MSG_PY_*), header (owned) and payload
 * (borrowed from the frame it was decoded from). */
struct pl_pyw_msg {
    int kind;
    json_t *h;
    const unsigned char *data;
    size_t ndata;
};

/* Decode the frame of 'len' bytes at 'buf' (after its 4 length bytes):
 * the header length, a JSON object of at most PL_PYW_HDR_MAX bytes with
 * an integer 'kind' of a PL_MSG_PY_* type, the rest the payload.  0, or
 * -1 with errp set (errno EPROTO) and nothing to clear. */
int pl_pyw_decode(const void *buf, size_t len, struct pl_pyw_msg *m,
                  struct pl_error *errp);
void pl_pyw_msg_clear(struct pl_pyw_msg *m);

/* HELLO (406), the worker's first message. */
struct pl_pyhello {
    int64_t pid;                       /* its getpid(), > 0 */
    char version[PL_PYW_VERSION_MAX + 1]; /* its Python's, printable */
};
int pl_pyhello_decode(const struct pl_pyw_msg *m, struct pl_pyhello *h,
                      struct pl_error *errp);

/* CALL (407), to a worker: run one call.  Borrowed. */
struct pl_pycall {
    uint64_t id, attempt;
    char *const *argv;           /* "MODULE:FUNCTION" and its arguments, or
                                    a label when the call is pickled */
    bool pickled;                /* the payload (or input_file) is one */
    const unsigned char *input;  /* the pickled call inline, or NULL */
    size_t ninput;
    const char *input_file;      /* or the file holding it */
    char *const *env;            /* the call's whole environment */
    const char *cwd;             /* NULL: the worker's */
    const char *out, *err;       /* the task's stdout, stderr (made) */
    const char *result_file;     /* where a large result goes */
    const char *prelude;         /* what the worker runs first, or NULL */
    uint64_t inline_max;         /* a result up to this comes inline */
    uint64_t result_max;         /* more than this fails the call */
    const struct pl_run_ref *refs; /* the values the pickled call names
                                    (proto/run.h), 'nrefs', or NULL */
    uint32_t nrefs;
};
/* The whole frame (its length first) into *buf (malloc()) and *len.
 * With refs, the header's "refs" lists them in order, {"id", "status":
 * "ok", "raised" or "none", "size" of its bytes inline or "file"}, and
 * "input_size" says how many bytes of the payload are the input: the
 * refs' inline bytes follow it, in their order.
 * Environment entries that are not UTF-8 are left out (JSON cannot
 * hold them); how many into *dropped (may be NULL).  0, or -1 with errp
 * (ENOMEM). */
int pl_pycall_encode(const struct pl_pycall *c, unsigned char **buf,
                     size_t *len, unsigned *dropped, struct pl_error *errp);

/* ENTERED (409): the worker is about to call the function of call 'id',
 * 'attempt': from here a SIGINT interrupts it.  0, or -1 with errp. */
int pl_pyentered_decode(const struct pl_pyw_msg *m, uint64_t *id,
                        uint64_t *attempt, struct pl_error *errp);

/* RESULT (408), the end of a call. */
enum pl_pyw_status {
    PL_PYW_OK = 1,               /* the value, pickled */
    PL_PYW_RAISED,               /* (exception, traceback text), pickled */
    PL_PYW_ERROR,                /* no result: 'reason' says why (the
                                    prelude failed, the result is too
                                    large or would not pickle...) */
};
struct pl_pyresult {
    uint64_t id, attempt;
    int status;                  /* enum pl_pyw_status */
    uint64_t size;               /* bytes of the pickle (OK, RAISED) */
    const unsigned char *data;   /* inline: 'size' bytes, borrowed from
                                    the message; or NULL */
    char *file;                  /* or the file written (owned) */
    char *reason;                /* the exception's last line, or why
                                    not (owned, may be NULL; required
                                    with ERROR) */
    char *repr;                  /* repr() of the value (owned, or NULL) */
    bool interrupted;            /* a KeyboardInterrupt ended the call
                                    (our SIGINT: a timeout, a cancel) */
};
/* Checked: a known status; OK and RAISED with the bytes inline (at most
 * 'inline_max', the size given) or a file named (at most 'result_max'),
 * not both; texts UTF-8 and within their limits.  0, or -1 with errp
 * (EPROTO) and 'r' cleared. */
int pl_pyresult_decode(const struct pl_pyw_msg *m, uint64_t inline_max,
                       uint64_t result_max, struct pl_pyresult *r,
                       struct pl_error *errp);
void pl_pyresult_clear(struct pl_pyresult *r);

#endif /* !PL_PROTO_PYWMSG_H */
