/* proto/clientmsg.c - the requests a client sends pilotd (101-111, 114) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/clientmsg.h"
#include "proto/poolmsg.h"
#include "proto/query.h"
#include "proto/spec.h"
#include "proto/state.h"
#include "proto/strv.h"

/* The selection's fields into 'm' (none when it is empty). */
static void sel_pack(struct pl_wmap *m, const struct pl_sel_req *s)
{
    if (s->nids)
        pl_wm_uintv(m, "ids", s->ids, s->nids);
    if (s->nelems)
        pl_wm_uintv(m, "elems", s->elems, s->nelems * 2);
}

void pl_sel_req_encode(struct pl_wbuf *w, int type, uint64_t seq,
                       const struct pl_sel_req *s)
{
    pl_wbuf_init(w, type, seq);
    sel_pack(&w->body, s);
}

void pl_sel_req_clear(struct pl_sel_req *s)
{
    int saved = errno;

    free(s->ids);
    free(s->elems);
    memset(s, 0, sizeof(*s));
    errno = saved;
}

bool pl_sel_req_given(const struct pl_sel_req *s)
{
    return s->nids + s->nelems > 0;
}

int pl_sel_req_decode(const msgpack_object *body, struct pl_sel_req *s,
                      struct pl_error *errp)
{
    uint32_t nel = 0;

    memset(s, 0, sizeof(*s));
    if (pl_mp_uintv(body, "ids", false, PL_REQ_MAX_IDS, UINT64_MAX, &s->ids,
                    &s->nids, errp) < 0
        || pl_mp_uintv(body, "elems", false, PL_REQ_MAX_IDS * 2, UINT64_MAX,
                       &s->elems, &nel, errp) < 0)
        goto error;
    if (nel % 2) {
        errno = EPROTO;
        pl_errprintf(errp, "elems: want pairs of array id and index");
        goto error;
    }
    s->nelems = nel / 2;
    return 0;
error:
    pl_sel_req_clear(s);
    return -1;
}

void pl_list_req_encode(struct pl_wbuf *w, uint64_t seq,
                        const struct pl_list_req *l)
{
    pl_wbuf_init(w, PL_MSG_LIST, seq);
    if (l->state)
        pl_wm_str(&w->body, "state", l->state);
    if (l->tags && l->tags[0])
        pl_wm_strv(&w->body, "tags", l->tags);
    if (l->limit)
        pl_wm_uint(&w->body, "limit", l->limit);
    if (l->after)
        pl_wm_uint(&w->body, "after", l->after);
    sel_pack(&w->body, &l->sel);
}

void pl_list_req_clear(struct pl_list_req *l)
{
    int saved = errno;

    free(l->state);
    pl_strv_free(l->tags);
    pl_sel_req_clear(&l->sel);
    memset(l, 0, sizeof(*l));
    errno = saved;
}

int pl_list_req_decode(const msgpack_object *body, struct pl_list_req *l,
                       struct pl_error *errp)
{
    memset(l, 0, sizeof(*l));
    if (pl_mp_str(body, "state", false, 16, &l->state, errp) < 0
        || pl_mp_strv(body, "tags", false, 0, PL_QUERY_MAX_TAGS, PL_REQ_MAX_TAG,
                      &l->tags, errp) < 0
        || pl_mp_uint(body, "limit", false, UINT64_MAX, &l->limit, errp) < 0
        || pl_mp_uint(body, "after", false, INT64_MAX, &l->after, errp) < 0
        || pl_sel_req_decode(body, &l->sel, errp) < 0)
        goto error;
    if (l->state && pl_state_parse(l->state) < 0) {
        errno = EINVAL;
        pl_errprintf(errp, "unknown state '%s'", l->state);
        goto error;
    }
    return 0;
error:
    pl_list_req_clear(l);
    return -1;
}

/* SHOW and EXPLAIN: one task, by id or as an array's element */
static void one_encode(struct pl_wbuf *w, int type, uint64_t seq,
                       const struct pl_show_req *s)
{
    pl_wbuf_init(w, type, seq);
    if (s->by_elem) {
        uint64_t el[2] = { s->id, s->index };
        pl_wm_uintv(&w->body, "elem", el, 2);
    }
    else
        pl_wm_uint(&w->body, "id", s->id);
}

static int one_decode(const msgpack_object *body, const char *what,
                      struct pl_show_req *s, struct pl_error *errp)
{
    uint64_t *el = NULL;
    uint32_t nel = 0;
    int has_id;

    memset(s, 0, sizeof(*s));
    if ((has_id = pl_mp_uint(body, "id", false, UINT64_MAX, &s->id, errp))
            < 0
        || pl_mp_uintv(body, "elem", false, 2, UINT64_MAX, &el, &nel, errp)
               < 0)
        return -1;
    if (!has_id && nel != 2) {
        free(el);
        errno = EPROTO;
        return pl_errprintf(errp, "%s: want id, or elem: [array id, "
                            "index]", what);
    }
    if (!has_id) {
        s->by_elem = true;
        s->id = el[0];
        s->index = el[1];
    }
    free(el);
    return 0;
}

void pl_show_req_encode(struct pl_wbuf *w, uint64_t seq,
                        const struct pl_show_req *s)
{
    one_encode(w, PL_MSG_SHOW, seq, s);
}

int pl_show_req_decode(const msgpack_object *body, struct pl_show_req *s,
                       struct pl_error *errp)
{
    return one_decode(body, "show", s, errp);
}

void pl_explain_req_encode(struct pl_wbuf *w, uint64_t seq,
                           const struct pl_show_req *s)
{
    one_encode(w, PL_MSG_EXPLAIN, seq, s);
}

int pl_explain_req_decode(const msgpack_object *body,
                          struct pl_show_req *s, struct pl_error *errp)
{
    return one_decode(body, "explain", s, errp);
}

void pl_submit_begin(struct pl_wbuf *w, uint64_t seq, uint32_t n)
{
    pl_submit_begin_watch(w, seq, n, NULL);
}

void pl_submit_begin_watch(struct pl_wbuf *w, uint64_t seq, uint32_t n,
                           const char *watch)
{
    pl_wbuf_init(w, PL_MSG_SUBMIT, seq);
    /* before the tasks: the specs follow their array's header */
    if (watch)
        pl_wm_str(&w->body, "watch", watch);
    msgpack_pack_array(pl_wm_key(&w->body, "tasks"), n);
}

int pl_submit_decode(const msgpack_object *body,
                     const msgpack_object **specs, struct pl_error *errp)
{
    if (pl_mp_array(body, "tasks", true, PL_SPEC_MAX_SUBMIT, specs, errp) < 0)
        return -1;
    if ((*specs)->via.array.size == 0) {
        errno = EINVAL;
        return pl_errprintf(errp, "no tasks in the request");
    }
    return 0;
}

void pl_results_req_encode(struct pl_wbuf *w, uint64_t seq,
                           const struct pl_results_req *r)
{
    pl_wbuf_init(w, PL_MSG_RESULTS, seq);
    pl_wm_uintv(&w->body, "ids", r->ids, r->nids);
}

void pl_results_req_clear(struct pl_results_req *r)
{
    int saved = errno;

    free(r->ids);
    memset(r, 0, sizeof(*r));
    errno = saved;
}

int pl_results_req_decode(const msgpack_object *body,
                          struct pl_results_req *r, struct pl_error *errp)
{
    memset(r, 0, sizeof(*r));
    if (pl_mp_uintv(body, "ids", true, PL_RESULTS_MAX_IDS, INT64_MAX,
                    &r->ids, &r->nids, errp) < 0)
        return -1;
    if (r->nids == 0) {
        pl_results_req_clear(r);
        errno = EINVAL;
        return pl_errprintf(errp, "results: no task named (ids)");
    }
    for (uint32_t i = 0; i < r->nids; i++)
        if (r->ids[i] == 0) {
            pl_results_req_clear(r);
            errno = EINVAL;
            return pl_errprintf(errp, "results: task id 0");
        }
    return 0;
}

int pl_pool_req_check(const struct pl_pool_req *p, struct pl_error *errp)
{
    if (!pl_pool_name_ok(p->name))
        return pl_errset(errp, EINVAL, "pool name '%.64s': want 1 to %d of "
                         "A-Z a-z 0-9 _ . -, starting with a letter or a "
                         "digit", p->name, PL_POOL_NAME_MAX);
    if (p->rpn == 0 || p->rpn > PL_SPEC_MAX_RPN)
        return pl_errset(errp, EINVAL, "workers per node: 1 to %d",
                         PL_SPEC_MAX_RPN);
    if (p->nodes > PL_SPEC_MAX_NODES)
        return pl_errset(errp, EINVAL, "nodes: at most %d",
                         PL_SPEC_MAX_NODES);
    if (p->cpr == 0 || p->cpr > PL_SPEC_MAX_CPR || p->gpr > PL_SPEC_MAX_GPR)
        return pl_errset(errp, EINVAL, "1 to %d cores and at most %d GPUs "
                         "per worker", PL_SPEC_MAX_CPR, PL_SPEC_MAX_GPR);
    if (p->nodes * p->rpn > PL_POOL_MAX_WORKERS)
        return pl_errset(errp, EINVAL, "at most %d workers in a pool",
                         PL_POOL_MAX_WORKERS);
    if (p->launcher < PL_LAUNCHER_UNSET || p->launcher > PL_LAUNCHER_MPIRUN)
        return pl_errset(errp, EINVAL, "unknown launcher");
    if (pl_strv_len(p->env) > 256)
        return pl_errset(errp, EINVAL, "at most 256 --env for a pool");
    for (char **e = p->env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e || !pl_utf8_str(*e))
            return pl_errset(errp, EINVAL, "--env '%.40s': want KEY=VALUE",
                             *e);
    }
    return 0;
}

void pl_pool_req_clear(struct pl_pool_req *p)
{
    int saved = errno;

    pl_strv_free(p->env);
    p->env = NULL;
    errno = saved;
}

void pl_pool_req_encode(struct pl_wbuf *w, int type, uint64_t seq,
                        const struct pl_pool_req *p)
{
    pl_wbuf_init(w, type, seq);
    if (type == PL_MSG_POOL_LIST)
        return;
    pl_wm_str(&w->body, "name", p->name);
    if (type != PL_MSG_POOL_START)
        return;
    pl_wm_uint(&w->body, "nodes", p->nodes);
    pl_wm_uint(&w->body, "ranks_per_node", p->rpn);
    pl_wm_uint(&w->body, "cores_per_rank", p->cpr);
    pl_wm_uint(&w->body, "gpus_per_rank", p->gpr);
    if (p->launcher != PL_LAUNCHER_UNSET)
        pl_wm_str(&w->body, "launcher", pl_launcher_name(p->launcher));
    if (p->env && p->env[0])
        pl_wm_strv(&w->body, "env", p->env);
}

int pl_pool_req_decode(const msgpack_object *body, int type,
                       struct pl_pool_req *p, struct pl_error *errp)
{
    char *name = NULL, *launcher = NULL;
    int has;

    memset(p, 0, sizeof(*p));
    p->rpn = p->cpr = 1;
    if (type == PL_MSG_POOL_LIST)
        return 0;
    if (pl_mp_str(body, "name", true, PL_POOL_NAME_MAX, &name, errp) < 0)
        return -1;
    snprintf(p->name, sizeof(p->name), "%s", name);
    free(name);
    if (type != PL_MSG_POOL_START) {
        if (!pl_pool_name_ok(p->name))
            return pl_errset(errp, EINVAL, "no pool is named '%.64s'",
                             p->name);
        return 0;
    }
    if (pl_mp_uint(body, "nodes", false, PL_SPEC_MAX_NODES, &p->nodes, errp)
            < 0
        || pl_mp_uint(body, "ranks_per_node", false, PL_SPEC_MAX_RPN,
                      &p->rpn, errp) < 0
        || pl_mp_uint(body, "cores_per_rank", false, PL_SPEC_MAX_CPR,
                      &p->cpr, errp) < 0
        || pl_mp_uint(body, "gpus_per_rank", false, PL_SPEC_MAX_GPR,
                      &p->gpr, errp) < 0
        || (has = pl_mp_str(body, "launcher", false, 16, &launcher, errp))
               < 0
        || pl_mp_strv(body, "env", false, 0, 256, PL_SPEC_MAX_ARG, &p->env,
                      errp) < 0)
        goto error;
    if (has && (p->launcher = pl_launcher_parse(launcher)) < 0) {
        pl_errset(errp, EINVAL, "unknown launcher (srun or mpirun)");
        goto error;
    }
    free(launcher);
    launcher = NULL;
    if (pl_pool_req_check(p, errp) < 0)
        goto error;
    return 0;
error:
    free(launcher);
    pl_pool_req_clear(p);
    return -1;
}

int pl_pool_spec_parse(const char *spec, struct pl_pool_req *p,
                       struct pl_error *errp)
{
    const char *c = strchr(spec, ':');
    uint64_t v[3] = { 0, 0, 1 };
    int n = 0;

    memset(p, 0, sizeof(*p));
    if (!c || (size_t)(c - spec) > PL_POOL_NAME_MAX)
        return pl_errset(errp, EINVAL, "pool '%.80s': want NAME:WORKERS_PER_"
                         "NODE[:GPUS_PER_WORKER[:CORES_PER_WORKER]]", spec);
    memcpy(p->name, spec, (size_t)(c - spec));
    p->name[c - spec] = '\0';
    while (c && *c == ':' && n < 3) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(c + 1, &end, 10);
        if (errno || end == c + 1 || (*end && *end != ':') || c[1] == '-')
            return pl_errset(errp, EINVAL, "pool '%.80s': want NAME:WORKERS_"
                             "PER_NODE[:GPUS_PER_WORKER[:CORES_PER_WORKER]] "
                             "as numbers", spec);
        v[n++] = x;
        c = *end ? end : NULL;
    }
    if (c)
        return pl_errset(errp, EINVAL, "pool '%.80s': too many fields", spec);
    p->rpn = v[0];
    p->gpr = v[1];
    p->cpr = v[2];
    return pl_pool_req_check(p, errp);
}
