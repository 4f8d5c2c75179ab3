/* proto/watchmsg.c - watches: WATCH (112), UNWATCH (113), the ENDS push (2) */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/state.h"
#include "proto/watchmsg.h"

bool pl_watch_token_ok(const char *s)
{
    size_t n = 0;

    if (!s)
        return false;
    for (; s[n]; n++) {
        char c = s[n];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
              || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return n >= PL_WATCH_TOKEN_MIN && n <= PL_WATCH_TOKEN_MAX;
}

/* The token field 'key' of 'body' into 'token'.  0, or -1 with errp. */
static int token_decode(const msgpack_object *body, const char *key,
                        char token[PL_WATCH_TOKEN_MAX + 1],
                        struct pl_error *errp)
{
    char *s = NULL;

    /* a longer string is read (to 256) so that the error says what the
     * rule is, not only that the type is wrong */
    if (pl_mp_str(body, key, true, 256, &s, errp) < 0)
        return -1;
    if (!pl_watch_token_ok(s)) {
        free(s);
        return pl_errset(errp, EINVAL, "watch token: want %d to %d of "
                         "A-Z a-z 0-9 _ -", PL_WATCH_TOKEN_MIN,
                         PL_WATCH_TOKEN_MAX);
    }
    snprintf(token, PL_WATCH_TOKEN_MAX + 1, "%s", s);
    free(s);
    return 0;
}

void pl_watch_req_encode(struct pl_wbuf *w, uint64_t seq,
                         const struct pl_watch_req *r)
{
    pl_wbuf_init(w, PL_MSG_WATCH, seq);
    pl_wm_str(&w->body, "token", r->token);
    if (r->attach)
        pl_wm_bool(&w->body, "attach", true);
    if (r->all)
        pl_wm_bool(&w->body, "all", true);
    if (r->make)
        pl_wm_bool(&w->body, "make", true);
    if (r->has_after)
        pl_wm_uint(&w->body, "after", r->after);
    if (r->sel.nids)
        pl_wm_uintv(&w->body, "ids", r->sel.ids, r->sel.nids);
    if (r->sel.nelems)
        pl_wm_uintv(&w->body, "elems", r->sel.elems, r->sel.nelems * 2);
}

void pl_watch_req_clear(struct pl_watch_req *r)
{
    pl_sel_req_clear(&r->sel);
}

int pl_watch_req_decode(const msgpack_object *body, struct pl_watch_req *r,
                        struct pl_error *errp)
{
    int has;

    memset(r, 0, sizeof(*r));
    if (token_decode(body, "token", r->token, errp) < 0
        || pl_mp_bool(body, "attach", false, &r->attach, errp) < 0
        || pl_mp_bool(body, "all", false, &r->all, errp) < 0
        || pl_mp_bool(body, "make", false, &r->make, errp) < 0
        || (has = pl_mp_uint(body, "after", false, INT64_MAX, &r->after,
                             errp)) < 0
        || pl_sel_req_decode(body, &r->sel, errp) < 0)
        goto error;
    r->has_after = has > 0;
    if (r->all && pl_sel_req_given(&r->sel)) {
        pl_errset(errp, EINVAL, "watch: 'all' or tasks, not both");
        goto error;
    }
    return 0;
error:
    pl_watch_req_clear(r);
    memset(r, 0, sizeof(*r));
    return -1;
}

void pl_unwatch_encode(struct pl_wbuf *w, uint64_t seq, const char *token)
{
    pl_wbuf_init(w, PL_MSG_UNWATCH, seq);
    pl_wm_str(&w->body, "token", token);
}

int pl_unwatch_decode(const msgpack_object *body,
                      char token[PL_WATCH_TOKEN_MAX + 1],
                      struct pl_error *errp)
{
    token[0] = '\0';
    return token_decode(body, "token", token, errp);
}

int pl_submit_watch_decode(const msgpack_object *body,
                           char token[PL_WATCH_TOKEN_MAX + 1],
                           struct pl_error *errp)
{
    const msgpack_object *o = pl_mp_get(body, "watch");

    token[0] = '\0';
    if (!o || o->type == MSGPACK_OBJECT_NIL)
        return 0;
    return token_decode(body, "watch", token, errp) < 0 ? -1 : 1;
}

void pl_watch_reply_encode(struct pl_wbuf *w, uint64_t seq,
                           const struct pl_watch_reply *r)
{
    struct pl_wmap data;

    pl_wbuf_reply(w, seq, 0, NULL);
    pl_wmap_begin(w, &data);
    pl_wm_str(&data, "token", r->token);
    pl_wm_uint(&data, "seq", r->seq);
    pl_wm_uint(&data, "n", r->n);
    pl_wm_uint(&data, "watching", r->watching);
    pl_wm_uint(&data, "pending", r->pending);
}

int pl_watch_reply_decode(const msgpack_object *data,
                          struct pl_watch_reply *r, struct pl_error *errp)
{
    memset(r, 0, sizeof(*r));
    if (!data || data->type != MSGPACK_OBJECT_MAP)
        return pl_errset(errp, EPROTO, "watch: the reply is not a map");
    if (token_decode(data, "token", r->token, errp) < 0
        || pl_mp_uint(data, "seq", true, INT64_MAX, &r->seq, errp) < 0
        || pl_mp_uint(data, "n", true, INT64_MAX, &r->n, errp) < 0
        || pl_mp_uint(data, "watching", true, INT64_MAX, &r->watching,
                      errp) < 0
        || pl_mp_uint(data, "pending", true, INT64_MAX, &r->pending, errp)
               < 0) {
        errno = EPROTO;
        return -1;
    }
    return 0;
}

void pl_ends_encode(struct pl_wbuf *w, const char *token, uint64_t n,
                    uint64_t pending, const struct pl_end *ends,
                    uint32_t nends)
{
    pl_wbuf_init(w, PL_MSG_ENDS, 0);
    pl_wm_str(&w->body, "token", token);
    pl_wm_uint(&w->body, "n", n);
    pl_wm_uint(&w->body, "pending", pending);
    msgpack_packer *pk = pl_wm_key(&w->body, "ends");
    msgpack_pack_array(pk, nends);
    for (uint32_t i = 0; i < nends; i++) {
        const struct pl_end *e = &ends[i];
        struct pl_wmap m;
        pl_wmap_begin(w, &m);
        pl_wm_uint(&m, "seq", e->seq);
        pl_wm_uint(&m, "id", e->id);
        pl_wm_str(&m, "state", pl_state_name(e->state));
        if (e->exit_code >= 0)
            pl_wm_uint(&m, "exit_code", (uint64_t)e->exit_code);
        if (e->signal >= 0)
            pl_wm_uint(&m, "signal", (uint64_t)e->signal);
        if (e->reason)
            pl_wm_str(&m, "reason", e->reason);
        pl_wm_double(&m, "end_time", e->end_time);
        if (e->result)
            pl_wm_bin(&m, "result", e->result, e->result_size);
    }
}

void pl_ends_clear(struct pl_ends *e)
{
    int saved = errno;

    for (uint32_t i = 0; e->ends && i < e->nends; i++)
        free(e->ends[i].reason);
    free(e->ends);
    e->ends = NULL;
    e->nends = 0;
    errno = saved;
}

/* One end of the 'ends' array into 'e' (its reason owned). */
static int end_decode(const msgpack_object *o, struct pl_end *e,
                      struct pl_error *errp)
{
    char *state = NULL;
    uint64_t v;
    int has;

    memset(e, 0, sizeof(*e));
    e->exit_code = e->signal = -1;
    if (o->type != MSGPACK_OBJECT_MAP)
        return pl_errset(errp, EPROTO, "ends: an end is not a map");
    for (uint32_t i = 0; i < o->via.map.size; i++)
        if (o->via.map.ptr[i].key.type != MSGPACK_OBJECT_STR)
            return pl_errset(errp, EPROTO, "ends: a key is not a string");
    if (pl_mp_uint(o, "seq", true, INT64_MAX, &e->seq, errp) < 0
        || pl_mp_uint(o, "id", true, INT64_MAX, &e->id, errp) < 0
        || pl_mp_double(o, "end_time", true, &e->end_time, errp) < 0
        || pl_mp_str(o, "state", true, 16, &state, errp) < 0)
        goto error;
    e->state = pl_state_parse(state);
    free(state);
    if (e->seq == 0 || e->id == 0 || !pl_state_final(e->state)
        || !isfinite(e->end_time) || e->end_time < 0) {
        pl_errset(errp, EPROTO, "ends: an end needs a seq, an id, a final "
                  "state and an end time");
        goto error;
    }
    if ((has = pl_mp_uint(o, "exit_code", false, INT32_MAX, &v, errp)) < 0)
        goto error;
    if (has)
        e->exit_code = (int)v;
    if ((has = pl_mp_uint(o, "signal", false, 255, &v, errp)) < 0)
        goto error;
    if (has)
        e->signal = (int)v;
    if (pl_mp_str(o, "reason", false, PL_END_REASON_MAX, &e->reason, errp)
        < 0)
        goto error;
    const msgpack_object *res = pl_mp_get(o, "result");
    if (res && res->type != MSGPACK_OBJECT_NIL) {
        if (res->type != MSGPACK_OBJECT_BIN
            || res->via.bin.size > PL_END_RESULT_MAX) {
            pl_errset(errp, EPROTO, "ends: 'result' is not bytes of at most "
                      "%d", PL_END_RESULT_MAX);
            goto error;
        }
        e->result = res->via.bin.ptr;
        e->result_size = res->via.bin.size;
    }
    return 0;
error:
    free(e->reason);
    e->reason = NULL;
    errno = errno ? errno : EPROTO;
    return -1;
}

int pl_ends_decode(const msgpack_object *body, struct pl_ends *e,
                   struct pl_error *errp)
{
    const msgpack_object *arr = NULL;

    memset(e, 0, sizeof(*e));
    if (token_decode(body, "token", e->token, errp) < 0
        || pl_mp_uint(body, "n", true, INT64_MAX, &e->n, errp) < 0
        || pl_mp_uint(body, "pending", true, INT64_MAX, &e->pending, errp)
               < 0
        || pl_mp_array(body, "ends", true, PL_ENDS_MAX, &arr, errp) < 0)
        return -1;
    if (e->n == 0)
        return pl_errset(errp, EPROTO, "ends: push counter 0");
    if (arr->via.array.size
        && !(e->ends = calloc(arr->via.array.size, sizeof(*e->ends))))
        return pl_errset(errp, ENOMEM, "out of memory");
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        if (end_decode(&arr->via.array.ptr[i], &e->ends[i], errp) < 0)
            goto error;
        e->nends = i + 1;
        if (i > 0 && e->ends[i].seq <= e->ends[i - 1].seq) {
            pl_errset(errp, EPROTO, "ends: seqs not in ascending order");
            goto error;
        }
    }
    return 0;
error:
    pl_ends_clear(e);
    errno = errno ? errno : EPROTO;
    return -1;
}
