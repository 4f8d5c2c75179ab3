/* proto/tlmsg.h - TIMELINE (116): the tasks of a report, page by page
 *
 * `pilot report` asks for the tasks a selection names with where and
 * when each of their ranks ran, in pages of at most PL_TL_PAGE tasks
 * (pilotd builds a page in one turn of its loop and never holds more);
 * the CLI runs the same query, pl_query_timeline() (proto/query.h), on
 * the state database of a pilot that is down.  docs/protocol.md has the
 * fields of the request and of its reply. */
#ifndef PL_PROTO_TLMSG_H
#define PL_PROTO_TLMSG_H

#include <stdint.h>

#include <msgpack.h>

#include "proto/clientmsg.h"
#include "proto/error.h"
#include "proto/msg.h"

/* Tasks in one reply at most, and its rank rows: a page ends after the
 * task that reaches PL_TL_PAGE_RANKS (a task of more ranks is alone). */
#define PL_TL_PAGE 5000
#define PL_TL_PAGE_RANKS 50000

struct pl_tl_req {
    char **tags;            /* "KEY=VALUE" or "KEY", all of them; NULL */
    char *name;             /* tasks of this name only; NULL: any */
    double since;           /* leave out the tasks that ended before this
                               (epoch seconds); 0: none */
    uint64_t after;         /* the page after the task of this id (the
                               last of the page before); 0: the first */
    uint64_t limit;         /* 1 to PL_TL_PAGE tasks; 0: PL_TL_PAGE */
    struct pl_sel_req sel;  /* ids, array elements; none: all tasks */
};

/* The whole request into 'w' (pl_wbuf_destroy()).  The fields are
 * borrowed. */
void pl_tl_req_encode(struct pl_wbuf *w, uint64_t seq,
                      const struct pl_tl_req *t);
/* Fill 't' (cleared first; owned: pl_tl_req_clear()) from 'body',
 * checking every field: tag keys as a spec's (pl_spec_tag_key()), a
 * name of at most PL_SPEC_MAX_NAME bytes, 'since' finite and >= 0,
 * 'limit' <= PL_TL_PAGE.  0, or -1 with errp (EPROTO, EINVAL, ENOMEM)
 * and nothing held. */
int pl_tl_req_decode(const msgpack_object *body, struct pl_tl_req *t,
                     struct pl_error *errp);
void pl_tl_req_clear(struct pl_tl_req *t);

#endif /* !PL_PROTO_TLMSG_H */
