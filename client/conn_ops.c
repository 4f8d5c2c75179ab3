/* client/conn_ops.c - the requests only pilotd answers: submit, cancel,
 * shutdown, keys, vet, cordon, pools, explain, grow, shrink, allocs
 * (finding and connecting the pilot, and the reads: conn.c) */
#include "client/conn.h"
#include "client/conn_private.h"
#include "proto/allocmsg.h"
#include "proto/msg.h"
#include "proto/vetmsg.h"

json_t *pl_conn_submit(struct pl_conn *c, const struct pl_spec *specs,
                       uint32_t n, const char *watch,
                       struct pl_error *errp)
{
    struct pl_wbuf w;
    uint64_t seq;

    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_submit_begin_watch(&w, seq, n, watch);
    for (uint32_t i = 0; i < n; i++)
        pl_spec_encode(&w, &specs[i]);
    return conn_call(c, &w, -1, "submit", errp);
}

json_t *pl_conn_cancel(struct pl_conn *c, const struct pl_sel_req *sel,
                       struct pl_error *errp)
{
    struct pl_wbuf w;
    uint64_t seq;

    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_sel_req_encode(&w, PL_MSG_CANCEL, seq, sel);
    return conn_call(c, &w, -1, "cancel", errp);
}

int pl_conn_shutdown(struct pl_conn *c, struct pl_error *errp)
{
    struct pl_wbuf w;
    uint64_t seq;
    json_t *out;

    if (!(seq = conn_seq(c, errp)))
        return -1;
    pl_wbuf_init(&w, PL_MSG_SHUTDOWN, seq);
    if (!(out = conn_call(c, &w, -1, "shutdown", errp)))
        return -1;
    json_decref(out);
    return 0;
}

json_t *pl_conn_keys(struct pl_conn *c, struct pl_error *errp)
{
    struct pl_wbuf w;
    uint64_t seq;

    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_wbuf_init(&w, PL_MSG_KEYS, seq);
    return conn_call(c, &w, JSON_OBJECT, "keys", errp);
}

json_t *pl_conn_vet(struct pl_conn *c, char **nodes, int wait_ms,
                    struct pl_error *errp)
{
    struct pl_vet_req q = { nodes };
    struct pl_wbuf w;
    uint64_t seq;
    int saved = c->timeout_ms;
    json_t *out;

    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_vet_req_encode(&w, seq, &q);
    /* pilotd answers once the nodes have run their checks */
    if (wait_ms > c->timeout_ms)
        c->timeout_ms = wait_ms;
    out = conn_call(c, &w, JSON_ARRAY, "vet", errp);
    c->timeout_ms = saved;
    return out;
}

json_t *pl_conn_cordon(struct pl_conn *c, const struct pl_cordon_req *q,
                       struct pl_error *errp)
{
    struct pl_wbuf w;
    uint64_t seq;

    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_cordon_req_encode(&w, seq, q);
    return conn_call(c, &w, JSON_OBJECT, "cordon", errp);
}

json_t *pl_conn_pool(struct pl_conn *c, int type,
                     const struct pl_pool_req *p, struct pl_error *errp)
{
    struct pl_wbuf w;
    uint64_t seq;

    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_pool_req_encode(&w, type, seq, p);
    return conn_call(c, &w, type == PL_MSG_POOL_LIST ? JSON_ARRAY : JSON_OBJECT,
                pl_msg_type_name(type), errp);
}

json_t *pl_conn_explain(struct pl_conn *c, const struct pl_sel_req *one,
                        struct pl_error *errp)
{
    struct pl_show_req r = { .id = one->nids ? one->ids[0] : one->elems[0] };
    struct pl_wbuf w;
    uint64_t seq;

    if (!(seq = conn_seq(c, errp)))
        return NULL;
    if (!one->nids) {
        r.by_elem = true;
        r.index = one->elems[1];
    }
    pl_explain_req_encode(&w, seq, &r);
    return conn_call(c, &w, JSON_OBJECT, "explain", errp);
}

json_t *pl_conn_grow(struct pl_conn *c, const struct pl_grow_req *q,
                     struct pl_error *errp)
{
    struct pl_wbuf w;
    uint64_t seq;

    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_grow_req_encode(&w, seq, q);
    return conn_call(c, &w, JSON_OBJECT, "grow", errp);
}

json_t *pl_conn_shrink(struct pl_conn *c, const struct pl_shrink_req *q,
                       struct pl_error *errp)
{
    struct pl_wbuf w;
    uint64_t seq;

    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_shrink_req_encode(&w, seq, q);
    return conn_call(c, &w, JSON_OBJECT, "shrink", errp);
}

json_t *pl_conn_allocs(struct pl_conn *c, struct pl_error *errp)
{
    struct pl_wbuf w;
    uint64_t seq;

    if (!(seq = conn_seq(c, errp)))
        return NULL;
    pl_wbuf_init(&w, PL_MSG_ALLOCS, seq);
    return conn_call(c, &w, JSON_OBJECT, "allocs", errp);
}
