/* client/report_data.c - TIMELINE pages into pilot report's model */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "client/report.h"
#include "proto/strv.h"

void pl_report_init(struct pl_report *r, const char *color_tag)
{
    memset(r, 0, sizeof(*r));
    r->color_tag = color_tag;
}

void pl_report_fini(struct pl_report *r)
{
    int saved = errno;

    for (size_t i = 0; i < r->ntasks; i++) {
        free(r->tasks[i].name);
        free(r->tasks[i].state);
        free(r->tasks[i].reason);
        json_decref(r->tasks[i].tags);
    }
    for (size_t i = 0; i < r->nbars; i++)
        free(r->bars[i].rows);
    for (size_t i = 0; i < r->ngroups; i++)
        free(r->groups[i]);
    free(r->tasks);
    free(r->bars);
    free(r->groups);
    free(r->rows);
    free(r->node_base);
    json_decref(r->nodes);
    memset(r, 0, sizeof(*r));
    errno = saved;
}

static int bad(struct pl_error *errp, const char *what)
{
    errno = EPROTO;
    return pl_errprintf(errp, "timeline: %s", what);
}

static int nomem(struct pl_error *errp)
{
    errno = ENOMEM;
    return pl_errprintf(errp, "out of memory");
}

/* The nodes of the first page into rows: each node's cores, then its
 * GPUs. */
static int add_nodes(struct pl_report *r, json_t *nodes,
                     struct pl_error *errp)
{
    size_t i, k, n = 0;
    json_t *nd, *v;

    if (!json_is_array(nodes))
        return bad(errp, "nodes is not an array");
    json_array_foreach(nodes, i, nd) {
        json_t *c = json_object_get(nd, "cores"), *g = json_object_get(nd,
                                                                      "gpus");
        if (!json_is_string(json_object_get(nd, "name")) || !json_is_array(c)
            || !json_is_array(g))
            return bad(errp, "a node without name, cores and gpus");
        n += json_array_size(c) + json_array_size(g);
    }
    if ((n && !(r->rows = calloc(n, sizeof(*r->rows))))
        || !(r->node_base = calloc(json_array_size(nodes) + 1,
                                   sizeof(*r->node_base))))
        return nomem(errp);
    r->nnodes = json_array_size(nodes);
    json_array_foreach(nodes, i, nd) {
        r->node_base[i] = r->nrows;
        for (int gpu = 0; gpu < 2; gpu++)
            json_array_foreach(json_object_get(nd, gpu ? "gpus" : "cores"),
                               k, v) {
                if (!json_is_integer(v))
                    return bad(errp, "a CPU or GPU id is not a number");
                r->rows[r->nrows++] = (struct pl_rrow){ (uint32_t)i,
                                                        gpu != 0,
                                                        json_integer_value(v) };
                if (gpu)
                    r->ngpus++;
                else
                    r->ncores++;
            }
    }
    r->node_base[r->nnodes] = r->nrows;
    r->nodes = json_incref(nodes);
    return 0;
}

/* The row of CPU or GPU 'id' of the node named 'node', or -1 (a node
 * that left the table, an id it no longer offers). */
static long find_row(struct pl_report *r, const char *node, bool gpu,
                     int64_t id)
{
    /* the node of the bar before is tried first: a page of tasks
     * comes in the order they ran, node by node in turns */
    for (size_t j = 0; j < r->nnodes; j++) {
        size_t i = (r->nlast + j) % r->nnodes;
        json_t *nd = json_array_get(r->nodes, i);
        if (strcmp(json_string_value(json_object_get(nd, "name")), node))
            continue;
        r->nlast = i;
        for (size_t k = r->node_base[i]; k < r->node_base[i + 1]; k++)
            if (r->rows[k].gpu == gpu && r->rows[k].id == id)
                return (long)k;
        return -1;
    }
    return -1;
}

static uint32_t group_of(struct pl_report *r, const char *key)
{
    /* few groups (names, tag values) against many tasks: the last one
     * found is tried first, an array's elements come together */
    if (r->glast < r->ngroups && !strcmp(r->groups[r->glast], key))
        return (uint32_t)r->glast;
    for (size_t i = 0; i < r->ngroups; i++)
        if (!strcmp(r->groups[i], key))
            return (uint32_t)(r->glast = i);
    if (r->ngroups == r->gcap) {
        size_t ncap = r->gcap ? r->gcap * 2 : 16;
        char **nv = realloc(r->groups, ncap * sizeof(*nv));
        if (!nv)
            return UINT32_MAX;
        r->groups = nv;
        r->gcap = ncap;
    }
    if (!(r->groups[r->ngroups] = strdup(key)))
        return UINT32_MAX;
    return (uint32_t)(r->glast = r->ngroups++);
}

static double num(json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int64_t inum(json_t *v)
{
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

static char *str(json_t *v)
{
    return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

/* The rank placements of task 'ti' (its "place" array). */
static int add_bars(struct pl_report *r, uint32_t ti, json_t *place,
                    struct pl_error *errp)
{
    size_t i, k;
    json_t *p, *v;

    if (!json_is_array(place))
        return bad(errp, "a task without its placement");
    json_array_foreach(place, i, p) {
        json_t *node = json_array_get(p, 2);
        size_t nc = json_array_size(json_array_get(p, 3));
        size_t ng = json_array_size(json_array_get(p, 4));
        struct pl_rbar *b;
        if (!json_is_array(p) || json_array_size(p) != 7
            || !json_is_integer(json_array_get(p, 0))
            || !json_is_integer(json_array_get(p, 1))
            || !json_is_number(json_array_get(p, 5)))
            return bad(errp, "a placement is not [attempt, rank, node, "
                       "cores, gpus, start, end]");
        if (!json_is_string(node))
            continue;            /* placed nowhere we know */
        if (r->nbars == r->bcap) {
            size_t ncap = r->bcap ? r->bcap * 2 : 1024;
            struct pl_rbar *nv = realloc(r->bars, ncap * sizeof(*nv));
            if (!nv)
                return nomem(errp);
            r->bars = nv;
            r->bcap = ncap;
        }
        b = &r->bars[r->nbars];
        *b = (struct pl_rbar){
            .task = ti,
            .attempt = (uint32_t)json_integer_value(json_array_get(p, 0)),
            .rank = (uint32_t)json_integer_value(json_array_get(p, 1)),
            .start = json_number_value(json_array_get(p, 5)),
            .end = num(json_array_get(p, 6)),
        };
        if (nc + ng && !(b->rows = malloc((nc + ng) * sizeof(*b->rows))))
            return nomem(errp);
        for (int gpu = 0; gpu < 2; gpu++)
            json_array_foreach(json_array_get(p, 3 + gpu), k, v) {
                long row = json_is_integer(v)
                               ? find_row(r, json_string_value(node),
                                          gpu != 0, json_integer_value(v))
                               : -1;
                if (row >= 0)
                    b->rows[b->nrows++] = (uint32_t)row;
            }
        r->nbars++;
    }
    return 0;
}

int pl_report_add_page(struct pl_report *r, const json_t *page,
                       struct pl_error *errp)
{
    json_t *tasks = json_object_get(page, "tasks"), *t;
    json_t *nodes = json_object_get(page, "nodes");
    size_t i;

    if (!json_is_array(tasks))
        return bad(errp, "no tasks in the reply");
    if (nodes && !r->nodes && add_nodes(r, nodes, errp) < 0)
        return -1;
    if (!r->nodes && !(r->nodes = json_array()))
        return nomem(errp);
    json_array_foreach(tasks, i, t) {
        struct pl_rtask *x;
        json_t *tags = json_object_get(t, "tags"), *cv;
        const char *key;
        if (!json_is_integer(json_object_get(t, "id"))
            || !json_is_string(json_object_get(t, "state"))
            || !json_is_number(json_object_get(t, "submit")))
            return bad(errp, "a task without id, state or submit time");
        if (r->ntasks == r->tcap) {
            size_t ncap = r->tcap ? r->tcap * 2 : 1024;
            struct pl_rtask *nv = realloc(r->tasks, ncap * sizeof(*nv));
            if (!nv)
                return nomem(errp);
            r->tasks = nv;
            r->tcap = ncap;
        }
        x = &r->tasks[r->ntasks];
        *x = (struct pl_rtask){
            .id = (uint64_t)json_integer_value(json_object_get(t, "id")),
            .name = str(json_object_get(t, "name")),
            .state = str(json_object_get(t, "state")),
            .reason = str(json_object_get(t, "reason")),
            .tags = json_is_object(tags) ? json_incref(tags) : json_object(),
            .submit = num(json_object_get(t, "submit")),
            .start = num(json_object_get(t, "start")),
            .end = num(json_object_get(t, "end")),
            .ranks = (uint32_t)inum(json_object_get(t, "ranks")),
            .cpr = (uint32_t)inum(json_object_get(t, "cores_per_rank")),
            .gpr = (uint32_t)inum(json_object_get(t, "gpus_per_rank")),
            .attempts = (uint32_t)inum(json_object_get(t, "attempts")),
            .exit_code = inum(json_object_get(t, "exit")),
            .signal = inum(json_object_get(t, "signal")),
            .maxrss_kb = inum(json_object_get(t, "maxrss_kb")),
            .cpu_user = num(json_object_get(t, "cpu_user")),
            .cpu_sys = num(json_object_get(t, "cpu_sys")),
        };
        r->ntasks++;
        if (!x->state || !x->tags)
            return nomem(errp);
        cv = r->color_tag ? json_object_get(x->tags, r->color_tag) : NULL;
        key = json_is_string(cv) ? json_string_value(cv)
              : r->color_tag    ? "(no tag)"
              : x->name         ? x->name
                                : "(no name)";
        if ((x->group = group_of(r, key)) == UINT32_MAX)
            return nomem(errp);
        if (add_bars(r, (uint32_t)(r->ntasks - 1), json_object_get(t, "place"),
                     errp) < 0)
            return -1;
    }
    return 0;
}

bool pl_report_span(const struct pl_report *r, double *t0, double *t1)
{
    double a = INFINITY, b = -INFINITY;

    for (size_t i = 0; i < r->ntasks; i++) {
        const struct pl_rtask *t = &r->tasks[i];
        if (t->submit < a)
            a = t->submit;
        if (t->end > b)
            b = t->end;
        if (!isnan(t->start) && isnan(t->end) && r->now > b)
            b = r->now;
    }
    for (size_t i = 0; i < r->nbars; i++) {
        if (r->bars[i].start < a)
            a = r->bars[i].start;
        if (r->bars[i].end > b)
            b = r->bars[i].end;
    }
    if (!isfinite(a) || !isfinite(b))
        return false;
    if (b <= a)
        b = a + 1;
    *t0 = a;
    *t1 = b;
    return true;
}
