/* proto/vetmsg.c - node vetting on the wire: VET, VET_RESULT, and the
 * client's VET and CORDON requests */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agentmsg.h"
#include "proto/strv.h"
#include "proto/vetmsg.h"

static int bad(struct pl_error *errp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int bad(struct pl_error *errp, const char *fmt, ...)
{
    char text[160];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    errno = EPROTO;
    return pl_errprintf(errp, "%s", text);
}

bool pl_vet_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > PL_VET_NAME_MAX)
        return false;
    for (; *s; s++)
        if (!(*s >= 'a' && *s <= 'z') && !(*s >= '0' && *s <= '9')
            && !strchr("_.-", *s))
            return false;
    return true;
}

/* A string field of valid UTF-8 (absent: *s stays NULL). */
static int text(const msgpack_object *map, const char *key, bool required,
                size_t max, char **s, struct pl_error *errp)
{
    int rc = pl_mp_str(map, key, required, max, s, errp);

    if (rc == 1 && !pl_utf8_str(*s)) {
        free(*s);
        *s = NULL;
        return bad(errp, "field '%s': not UTF-8", key);
    }
    return rc;
}

/* ------------------------------------------------------------ settings */

void pl_vetconf_clear(struct pl_vetconf *c)
{
    if (!c)
        return;
    free(c->gpu_devices);
    pl_strv_free(c->disk_paths);
    for (uint32_t i = 0; i < c->next; i++) {
        free(c->ext[i].name);
        pl_strv_free(c->ext[i].argv);
    }
    free(c->ext);
    memset(c, 0, sizeof(*c));
}

void pl_vet_encode(struct pl_wbuf *w, uint64_t seq, uint64_t token,
                   const struct pl_vetconf *c)
{
    pl_wbuf_init(w, PL_MSG_VET, seq);
    pl_wm_uint(&w->body, "token", token);
    pl_wm_double(&w->body, "timeout", c->timeout);
    pl_wm_bool(&w->body, "gpus", c->gpus);
    if (c->gpu_devices)
        pl_wm_str(&w->body, "gpu_devices", c->gpu_devices);
    pl_wm_bool(&w->body, "gpu_vetcheck", c->gpu_vetcheck);
    pl_wm_double(&w->body, "gpu_min_free_pct", c->gpu_min_free_pct);
    pl_wm_double(&w->body, "gpu_max_temp", c->gpu_max_temp);
    pl_wm_bool(&w->body, "disk", c->disk);
    pl_wm_bool(&w->body, "disk_task_dir", c->disk_task_dir);
    if (c->disk_paths)
        pl_wm_strv(&w->body, "disk_paths", c->disk_paths);
    pl_wm_uint(&w->body, "disk_min_mb", c->disk_min_mb);
    pl_wm_bool(&w->body, "memory", c->memory);
    pl_wm_uint(&w->body, "mem_min_mb", c->mem_min_mb);
    pl_wm_bool(&w->body, "cpu", c->cpu);
    pl_wm_uint(&w->body, "cpu_iterations", c->cpu_iterations);
    pl_wm_uint(&w->body, "cpu_slices", c->cpu_slices);
    msgpack_packer *pk = pl_wm_key(&w->body, "external");
    msgpack_pack_array(pk, c->next);
    for (uint32_t i = 0; i < c->next; i++) {
        struct pl_wmap m;
        pl_wmap_begin(w, &m);
        pl_wm_str(&m, "name", c->ext[i].name);
        pl_wm_strv(&m, "argv", c->ext[i].argv);
        pl_wm_double(&m, "timeout", c->ext[i].timeout);
    }
}

static int timeout_ok(double t)
{
    return isfinite(t) && t > 0 && t <= PL_VET_TIMEOUT_MAX;
}

int pl_vet_decode(const msgpack_object *body, uint64_t *token,
                  struct pl_vetconf *c, struct pl_error *errp)
{
    const msgpack_object *ext = NULL;
    uint64_t slices = 0;

    memset(c, 0, sizeof(*c));
    if (pl_mp_uint(body, "token", true, UINT64_MAX, token, errp) < 0
        || pl_mp_double(body, "timeout", true, &c->timeout, errp) < 0
        || pl_mp_bool(body, "gpus", false, &c->gpus, errp) < 0
        || text(body, "gpu_devices", false, PL_VET_TEXT_MAX, &c->gpu_devices,
                errp) < 0
        || pl_mp_bool(body, "gpu_vetcheck", false, &c->gpu_vetcheck, errp)
               < 0
        || pl_mp_double(body, "gpu_min_free_pct", false, &c->gpu_min_free_pct,
                        errp) < 0
        || pl_mp_double(body, "gpu_max_temp", false, &c->gpu_max_temp, errp)
               < 0
        || pl_mp_bool(body, "disk", false, &c->disk, errp) < 0
        || pl_mp_bool(body, "disk_task_dir", false, &c->disk_task_dir, errp)
               < 0
        || pl_mp_strv(body, "disk_paths", false, 0, PL_VET_MAX_PATHS,
                      PL_VET_TEXT_MAX, &c->disk_paths, errp) < 0
        || pl_mp_uint(body, "disk_min_mb", false, UINT32_MAX, &c->disk_min_mb,
                      errp) < 0
        || pl_mp_bool(body, "memory", false, &c->memory, errp) < 0
        || pl_mp_uint(body, "mem_min_mb", false, UINT32_MAX, &c->mem_min_mb,
                      errp) < 0
        || pl_mp_bool(body, "cpu", false, &c->cpu, errp) < 0
        || pl_mp_uint(body, "cpu_iterations", false, UINT64_C(1) << 40,
                      &c->cpu_iterations, errp) < 0
        || pl_mp_uint(body, "cpu_slices", false, 1000, &slices, errp) < 0
        || pl_mp_array(body, "external", false, PL_VET_MAX_EXTERNAL, &ext,
                       errp) < 0)
        goto error;
    c->cpu_slices = (uint32_t)slices;
    if (!timeout_ok(c->timeout)) {
        bad(errp, "field '%s': want seconds in (0, 3600]", "timeout");
        goto error;
    }
    if (c->cpu && (c->cpu_iterations == 0 || c->cpu_slices == 0)) {
        bad(errp, "field '%s': cpu needs iterations and slices",
            "cpu_slices");
        goto error;
    }
    if (!(c->gpu_min_free_pct >= 0 && c->gpu_min_free_pct <= 100)
        || !(c->gpu_max_temp >= 0 && c->gpu_max_temp <= 200)) {
        bad(errp, "field '%s': want 0..100 %% and 0..200 C",
            "gpu_min_free_pct");
        goto error;
    }
    if (c->gpu_devices && !strstr(c->gpu_devices, "%s")) {
        bad(errp, "field '%s': no %%s for the GPU id", "gpu_devices");
        goto error;
    }
    for (uint32_t i = 0; ext && i < ext->via.array.size; i++) {
        const msgpack_object *e = &ext->via.array.ptr[i];
        struct pl_vet_external x = { 0 };
        if (e->type != MSGPACK_OBJECT_MAP) {
            bad(errp, "field '%s': entry not a map", "external");
            goto error;
        }
        for (uint32_t k = 0; k < e->via.map.size; k++)
            if (e->via.map.ptr[k].key.type != MSGPACK_OBJECT_STR) {
                bad(errp, "field '%s': a key not a string", "external");
                goto error;
            }
        if (!c->ext && !(c->ext = calloc(ext->via.array.size,
                                         sizeof(*c->ext)))) {
            pl_errprintf(errp, "out of memory");
            goto error;
        }
        c->ext[c->next++] = x;
        struct pl_vet_external *p = &c->ext[c->next - 1];
        if (text(e, "name", true, PL_VET_NAME_MAX, &p->name, errp) < 0
            || pl_mp_strv(e, "argv", true, 1, PL_VET_MAX_ARGS,
                          PL_VET_TEXT_MAX, &p->argv, errp) < 0
            || pl_mp_double(e, "timeout", true, &p->timeout, errp) < 0)
            goto error;
        if (!pl_vet_name_ok(p->name) || !timeout_ok(p->timeout)) {
            bad(errp, "field '%s': bad name or timeout", "external");
            goto error;
        }
    }
    return 0;
error:
    pl_vetconf_clear(c);
    return -1;
}

/* ------------------------------------------------------------ results */

void pl_vet_result_clear(struct pl_vet_result *r)
{
    if (!r)
        return;
    free(r->node);
    for (uint32_t i = 0; i < r->ncheck; i++) {
        free(r->check[i].name);
        free(r->check[i].unit);
        free(r->check[i].detail);
    }
    free(r->check);
    memset(r, 0, sizeof(*r));
}

void pl_vet_result_encode(struct pl_wbuf *w, uint64_t seq,
                          const struct pl_vet_result *r)
{
    pl_wbuf_init(w, PL_MSG_VET_RESULT, seq);
    pl_wm_str(&w->body, "node", r->node);
    pl_wm_uint(&w->body, "token", r->token);
    pl_wm_double(&w->body, "time", r->time);
    pl_wm_double(&w->body, "took", r->took);
    pl_wm_bool(&w->body, "ok", r->ok);
    msgpack_packer *pk = pl_wm_key(&w->body, "checks");
    msgpack_pack_array(pk, r->ncheck);
    for (uint32_t i = 0; i < r->ncheck; i++) {
        const struct pl_vet_check *c = &r->check[i];
        struct pl_wmap m;
        pl_wmap_begin(w, &m);
        pl_wm_str(&m, "name", c->name);
        pl_wm_bool(&m, "ok", c->ok);
        /* NaN: no figure; msgpack carries it, but absent is plainer */
        if (isfinite(c->figure))
            pl_wm_double(&m, "figure", c->figure);
        if (c->unit)
            pl_wm_str(&m, "unit", c->unit);
        if (isfinite(c->limit))
            pl_wm_double(&m, "limit", c->limit);
        if (c->detail)
            pl_wm_str(&m, "detail", c->detail);
    }
}

static int check_decode(const msgpack_object *o, struct pl_vet_check *c,
                        struct pl_error *errp)
{
    c->figure = c->limit = NAN;
    if (o->type != MSGPACK_OBJECT_MAP)
        return bad(errp, "field '%s': entry not a map", "checks");
    for (uint32_t k = 0; k < o->via.map.size; k++)
        if (o->via.map.ptr[k].key.type != MSGPACK_OBJECT_STR)
            return bad(errp, "field '%s': a key not a string", "checks");
    if (text(o, "name", true, PL_VET_NAME_MAX, &c->name, errp) < 0
        || pl_mp_bool(o, "ok", true, &c->ok, errp) < 0
        || pl_mp_double(o, "figure", false, &c->figure, errp) < 0
        || text(o, "unit", false, PL_VET_UNIT_MAX, &c->unit, errp) < 0
        || pl_mp_double(o, "limit", false, &c->limit, errp) < 0
        || text(o, "detail", false, PL_VET_TEXT_MAX, &c->detail, errp) < 0)
        return -1;
    if (!pl_vet_name_ok(c->name))
        return bad(errp, "field '%s': bad check name", "checks");
    if (!isfinite(c->figure))
        c->figure = NAN;
    if (!isfinite(c->limit))
        c->limit = NAN;
    return 0;
}

int pl_vet_result_decode(const msgpack_object *body, struct pl_vet_result *r,
                         struct pl_error *errp)
{
    const msgpack_object *arr = NULL;
    bool all = true;

    memset(r, 0, sizeof(*r));
    if (text(body, "node", true, PL_NODE_NAME_MAX, &r->node, errp) < 0
        || pl_mp_uint(body, "token", true, UINT64_MAX, &r->token, errp) < 0
        || pl_mp_double(body, "time", true, &r->time, errp) < 0
        || pl_mp_double(body, "took", false, &r->took, errp) < 0
        || pl_mp_bool(body, "ok", true, &r->ok, errp) < 0
        || pl_mp_array(body, "checks", true, PL_VET_MAX_CHECKS, &arr, errp)
               < 0)
        goto error;
    if (!pl_node_name_ok(r->node)) {
        bad(errp, "field '%s': not a node name", "node");
        goto error;
    }
    if (!isfinite(r->time) || r->time <= 0) {
        bad(errp, "field '%s': not a time", "time");
        goto error;
    }
    if (!isfinite(r->took) || r->took < 0)
        r->took = 0;
    if (arr->via.array.size
        && !(r->check = calloc(arr->via.array.size, sizeof(*r->check)))) {
        pl_errprintf(errp, "out of memory");
        goto error;
    }
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        r->ncheck++;
        if (check_decode(&arr->via.array.ptr[i], &r->check[i], errp) < 0)
            goto error;
        all = all && r->check[i].ok;
    }
    /* an agent cannot call a node fit that a check of its own fails */
    r->ok = r->ok && all;
    return 0;
error:
    pl_vet_result_clear(r);
    return -1;
}

/* ------------------------------------------------------------ requests */

void pl_vet_req_encode(struct pl_wbuf *w, uint64_t seq,
                       const struct pl_vet_req *q)
{
    pl_wbuf_init(w, PL_MSG_VET_REQ, seq);
    if (q->nodes)
        pl_wm_strv(&w->body, "nodes", q->nodes);
}

int pl_vet_req_decode(const msgpack_object *body, struct pl_vet_req *q,
                      struct pl_error *errp)
{
    memset(q, 0, sizeof(*q));
    if (pl_mp_strv(body, "nodes", false, 0, PL_VET_REQ_MAX_NODES,
                   PL_NODE_NAME_MAX, &q->nodes, errp) < 0)
        return -1;
    for (char **p = q->nodes; p && *p; p++)
        if (!pl_node_name_ok(*p)) {
            pl_vet_req_clear(q);
            return bad(errp, "field '%s': not a node name", "nodes");
        }
    return 0;
}

void pl_vet_req_clear(struct pl_vet_req *q)
{
    if (q) {
        pl_strv_free(q->nodes);
        q->nodes = NULL;
    }
}

void pl_cordon_req_encode(struct pl_wbuf *w, uint64_t seq,
                          const struct pl_cordon_req *q)
{
    pl_wbuf_init(w, PL_MSG_CORDON, seq);
    pl_wm_str(&w->body, "node", q->node);
    if (q->reason)
        pl_wm_str(&w->body, "reason", q->reason);
    if (q->uncordon)
        pl_wm_bool(&w->body, "uncordon", true);
}

int pl_cordon_req_decode(const msgpack_object *body, struct pl_cordon_req *q,
                         struct pl_error *errp)
{
    memset(q, 0, sizeof(*q));
    if (text(body, "node", true, PL_NODE_NAME_MAX, &q->node, errp) < 0
        || text(body, "reason", false, PL_CORDON_REASON_MAX, &q->reason, errp)
               < 0
        || pl_mp_bool(body, "uncordon", false, &q->uncordon, errp) < 0)
        goto error;
    if (!pl_node_name_ok(q->node)) {
        bad(errp, "field '%s': not a node name", "node");
        goto error;
    }
    return 0;
error:
    pl_cordon_req_clear(q);
    return -1;
}

void pl_cordon_req_clear(struct pl_cordon_req *q)
{
    if (q) {
        free(q->node);
        free(q->reason);
        q->node = q->reason = NULL;
    }
}
