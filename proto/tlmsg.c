/* proto/tlmsg.c - TIMELINE (116): the request of `pilot report` */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto/query.h"
#include "proto/spec.h"
#include "proto/strv.h"
#include "proto/tlmsg.h"

void pl_tl_req_encode(struct pl_wbuf *w, uint64_t seq,
                      const struct pl_tl_req *t)
{
    pl_wbuf_init(w, PL_MSG_TIMELINE, seq);
    if (t->tags && t->tags[0])
        pl_wm_strv(&w->body, "tags", t->tags);
    if (t->name)
        pl_wm_str(&w->body, "name", t->name);
    if (t->since > 0)
        pl_wm_double(&w->body, "since", t->since);
    if (t->after)
        pl_wm_uint(&w->body, "after", t->after);
    if (t->limit)
        pl_wm_uint(&w->body, "limit", t->limit);
    if (t->sel.nids)
        pl_wm_uintv(&w->body, "ids", t->sel.ids, t->sel.nids);
    if (t->sel.nelems)
        pl_wm_uintv(&w->body, "elems", t->sel.elems, t->sel.nelems * 2);
}

void pl_tl_req_clear(struct pl_tl_req *t)
{
    int saved = errno;

    pl_strv_free(t->tags);
    free(t->name);
    pl_sel_req_clear(&t->sel);
    memset(t, 0, sizeof(*t));
    errno = saved;
}

int pl_tl_req_decode(const msgpack_object *body, struct pl_tl_req *t,
                     struct pl_error *errp)
{
    memset(t, 0, sizeof(*t));
    if (pl_mp_strv(body, "tags", false, 0, PL_QUERY_MAX_TAGS, PL_REQ_MAX_TAG,
                   &t->tags, errp) < 0
        || pl_mp_str(body, "name", false, PL_SPEC_MAX_NAME, &t->name, errp)
               < 0
        || pl_mp_double(body, "since", false, &t->since, errp) < 0
        || pl_mp_uint(body, "after", false, INT64_MAX, &t->after, errp) < 0
        || pl_mp_uint(body, "limit", false, PL_TL_PAGE, &t->limit, errp) < 0
        || pl_sel_req_decode(body, &t->sel, errp) < 0)
        goto error;
    /* the keys go into a JSON path (proto/query.c): the spec's rule */
    for (size_t i = 0; t->tags && t->tags[i]; i++)
        if (!pl_spec_tag_key(t->tags[i])) {
            errno = EINVAL;
            pl_errprintf(errp, "tags: '%.64s' is not KEY or KEY=VALUE "
                         "(a key is 1 to %d of A-Z a-z 0-9 _ . -)",
                         t->tags[i], PL_SPEC_MAX_TAG_KEY);
            goto error;
        }
    if (!isfinite(t->since) || t->since < 0) {
        errno = EPROTO;
        pl_errprintf(errp, "since: want a time in seconds, >= 0");
        goto error;
    }
    return 0;
error:
    pl_tl_req_clear(t);
    return -1;
}
