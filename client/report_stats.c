/* client/report_stats.c - pilot report's summary, computed in C
 *
 * The page draws what this computes (and --json prints it), so the
 * numbers a test checks and the ones a person reads are the same; the
 * aggregated timeline of a large report is computed here too, so the
 * page does not carry a bar per rank. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "client/report.h"

#define HIST_BINS 30
#define SLOWEST 20
#define UTIL_BUCKETS 200
#define FAIL_IDS 10            /* ids listed under a failure reason */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

double pl_report_pct(double *v, size_t n, double p)
{
    size_t k;

    if (!n)
        return NAN;
    qsort(v, n, sizeof(*v), cmp_double);
    /* nearest rank: the smallest value with p% of them at or below */
    k = (size_t)ceil(p / 100.0 * (double)n);
    return v[k ? k - 1 : 0];
}

json_t *pl_report_hist(const double *v, size_t n, size_t nbins)
{
    double hi = 0, minpos = INFINITY;
    json_t *edges = json_array(), *counts = json_array(), *out;
    size_t *c = calloc(nbins ? nbins : 1, sizeof(*c));
    bool logb;

    for (size_t i = 0; i < n; i++) {
        hi = v[i] > hi ? v[i] : hi;
        if (v[i] > 0 && v[i] < minpos)
            minpos = v[i];
    }
    /* run times of a pipeline span milliseconds to hours: log bins
     * then, from the smallest positive value (zeros go in the first) */
    logb = n && isfinite(minpos) && hi / minpos > 100;
    if (!n || hi <= 0)
        hi = 1;
    for (size_t b = 0; b <= nbins; b++) {
        double e = logb ? minpos * pow(hi / minpos, (double)b / nbins)
                        : hi * (double)b / nbins;
        json_array_append_new(edges, json_real(b == 0 && !logb ? 0 : e));
    }
    for (size_t i = 0; c && i < n; i++) {
        double f = logb ? (v[i] > minpos ? log(v[i] / minpos)
                                               / log(hi / minpos) : 0)
                        : v[i] / hi;
        size_t b = (size_t)(f * (double)nbins);
        c[b >= nbins ? nbins - 1 : b]++;
    }
    for (size_t b = 0; c && b < nbins; b++)
        json_array_append_new(counts, json_integer((json_int_t)c[b]));
    free(c);
    out = c ? json_pack("{s:o, s:o, s:b}", "edges", edges, "counts", counts,
                        "log", logb)
            : NULL;
    if (!out) {
        json_decref(edges);
        json_decref(counts);
    }
    return out;
}

static double wall(const struct pl_rtask *t)
{
    return !isnan(t->start) && !isnan(t->end) ? t->end - t->start : NAN;
}

static bool failed(const struct pl_rtask *t)
{
    return !strcmp(t->state, "failed") || !strcmp(t->state, "timeout")
           || !strcmp(t->state, "canceled");
}

/* A group's row of the per-name or per-tag table. */
struct acc {
    const char *key;           /* borrowed */
    char *own;                 /* or owned */
    size_t count, done, failed;
    double *walls;
    size_t nwall, wcap;
    double cpu, core_secs;     /* measured tasks only */
};

static struct acc *acc_get(struct acc **v, size_t *n, const char *key)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*v)[i].key, key))
            return &(*v)[i];
    struct acc *nv = realloc(*v, (*n + 1) * sizeof(*nv));
    if (!nv)
        return NULL;
    *v = nv;
    nv[*n] = (struct acc){ .key = key };
    return &nv[(*n)++];
}

static int acc_add(struct acc *a, const struct pl_rtask *t)
{
    double w = wall(t);

    a->count++;
    a->done += !strcmp(t->state, "done");
    a->failed += failed(t);
    if (!isnan(w)) {
        if (a->nwall == a->wcap) {
            size_t ncap = a->wcap ? a->wcap * 2 : 64;
            double *nv = realloc(a->walls, ncap * sizeof(*nv));
            if (!nv)
                return -1;
            a->walls = nv;
            a->wcap = ncap;
        }
        a->walls[a->nwall++] = w;
        /* seff's efficiency: CPU time over cores x wall */
        if (!isnan(t->cpu_user) && !isnan(t->cpu_sys) && w > 0) {
            a->cpu += t->cpu_user + t->cpu_sys;
            a->core_secs += (double)t->ranks * t->cpr * w;
        }
    }
    return 0;
}

static json_t *real_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *acc_json(struct acc *v, size_t n)
{
    json_t *out = json_array();
    double sum;

    for (size_t i = 0; out && i < n; i++) {
        struct acc *a = &v[i];
        sum = 0;
        for (size_t k = 0; k < a->nwall; k++)
            sum += a->walls[k];
        json_array_append_new(
            out, json_pack("{s:s, s:I, s:I, s:I, s:o, s:o, s:o}", "group",
                           a->key, "count", (json_int_t)a->count, "done",
                           (json_int_t)a->done, "failed",
                           (json_int_t)a->failed, "mean_wall",
                           real_or_null(a->nwall ? sum / a->nwall : NAN),
                           "p95_wall",
                           real_or_null(pl_report_pct(a->walls, a->nwall,
                                                      95)),
                           "cpu_eff",
                           real_or_null(a->core_secs > 0
                                            ? a->cpu / a->core_secs : NAN)));
    }
    return out;
}

static void acc_free(struct acc *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].walls);
        free(v[i].own);
    }
    free(v);
}

/* Per name and per tag (each "KEY=VALUE" a group). */
static int tables(const struct pl_report *r, json_t *out)
{
    struct acc *byname = NULL, *bytag = NULL;
    size_t nn = 0, nt = 0;
    int rc = -1;

    for (size_t i = 0; i < r->ntasks; i++) {
        const struct pl_rtask *t = &r->tasks[i];
        const char *k;
        json_t *v;
        struct acc *a = acc_get(&byname, &nn, t->name ? t->name
                                                      : "(no name)");
        if (!a || acc_add(a, t) < 0)
            goto done;
        json_object_foreach(t->tags, k, v) {
            char *kv;
            if (!json_is_string(v)
                || asprintf(&kv, "%s=%s", k, json_string_value(v)) < 0)
                continue;
            if (!(a = acc_get(&bytag, &nt, kv))) {
                free(kv);
                goto done;
            }
            if (a->key == kv)
                a->own = kv;
            else
                free(kv);
            if (acc_add(a, t) < 0)
                goto done;
        }
    }
    json_object_set_new(out, "by_name", acc_json(byname, nn));
    json_object_set_new(out, "by_tag", acc_json(bytag, nt));
    rc = 0;
done:
    acc_free(byname, nn);
    acc_free(bytag, nt);
    return rc;
}

static json_t *failures(const struct pl_report *r)
{
    struct acc *v = NULL;
    size_t n = 0;
    json_t *out = json_array();
    json_t **ids = NULL;

    for (size_t i = 0; out && i < r->ntasks; i++) {
        const struct pl_rtask *t = &r->tasks[i];
        if (!failed(t))
            continue;
        size_t before = n;
        struct acc *a = acc_get(&v, &n, t->reason ? t->reason : t->state);
        if (!a)
            goto error;
        if (n > before) {
            json_t **nids = realloc(ids, n * sizeof(*nids));
            if (!nids)
                goto error;
            ids = nids;
            ids[n - 1] = json_array();
        }
        size_t k = (size_t)(a - v);
        if (a->count++ < FAIL_IDS)
            json_array_append_new(ids[k], json_integer((json_int_t)t->id));
    }
    for (size_t k = 0; out && k < n; k++)
        json_array_append_new(out, json_pack("{s:s, s:I, s:o}", "reason",
                                             v[k].key, "count",
                                             (json_int_t)v[k].count, "ids",
                                             ids[k]));
    acc_free(v, n);
    free(ids);
    return out;
error:
    for (size_t k = 0; k < n && ids; k++)
        json_decref(ids[k]);
    acc_free(v, n);
    free(ids);
    json_decref(out);
    return NULL;
}

static int cmp_wall_desc(const void *a, const void *b)
{
    double x = wall(*(const struct pl_rtask *const *)a);
    double y = wall(*(const struct pl_rtask *const *)b);

    return (x < y) - (x > y);
}

static json_t *slowest(const struct pl_report *r)
{
    const struct pl_rtask **v = malloc((r->ntasks + 1) * sizeof(*v));
    size_t n = 0;
    json_t *out = json_array();

    for (size_t i = 0; v && i < r->ntasks; i++)
        if (!isnan(wall(&r->tasks[i])))
            v[n++] = &r->tasks[i];
    if (v)
        qsort(v, n, sizeof(*v), cmp_wall_desc);
    for (size_t i = 0; v && out && i < n && i < SLOWEST; i++)
        json_array_append_new(out,
                              json_pack("{s:I, s:s?, s:s, s:f, s:o, s:I}",
                                        "id", (json_int_t)v[i]->id, "name",
                                        v[i]->name, "state", v[i]->state,
                                        "wall", wall(v[i]), "queue_wait",
                                        real_or_null(v[i]->start
                                                     - v[i]->submit),
                                        "ranks", (json_int_t)v[i]->ranks));
    free(v);
    return v ? out : (json_decref(out), NULL);
}

/* Seconds of [a, b) in bucket k of [t0 + k dt, t0 + (k + 1) dt), added
 * to acc[k] times 'w' for each bucket it covers. */
static void spread(double *acc, size_t nb, double t0, double dt, double a,
                   double b, double w)
{
    if (b <= a || dt <= 0)
        return;
    double fa = (a - t0) / dt, fb = (b - t0) / dt;
    long ka = (long)floor(fa), kb = (long)floor(fb);

    for (long k = ka < 0 ? 0 : ka; k <= kb && k < (long)nb; k++) {
        double lo = k > fa ? (double)k : fa, hi = k + 1 < fb ? k + 1.0 : fb;
        if (hi > lo)
            acc[k] += (hi - lo) * dt * w;
    }
}

static double bar_end(const struct pl_report *r, const struct pl_rbar *b)
{
    return isnan(b->end) ? r->now : b->end;
}

json_t *pl_report_heat(const struct pl_report *r, double t0, double dt,
                       size_t nb)
{
    double *acc = calloc(r->nrows * nb + 1, sizeof(*acc));
    json_t *out = json_array();

    for (size_t i = 0; acc && i < r->nbars; i++) {
        const struct pl_rbar *b = &r->bars[i];
        for (uint32_t k = 0; k < b->nrows; k++)
            spread(acc + (size_t)b->rows[k] * nb, nb, t0, dt, b->start,
                   bar_end(r, b), 1);
    }
    for (size_t row = 0; acc && out && row < r->nrows; row++) {
        json_t *a = json_array();
        for (size_t k = 0; a && k < nb; k++) {
            double f = acc[row * nb + k] / dt;
            json_array_append_new(a, json_integer((json_int_t)lround(
                                         (f > 1 ? 1 : f) * 100)));
        }
        json_array_append_new(out, a);
    }
    if (!acc) {
        json_decref(out);
        out = NULL;
    }
    free(acc);
    return out;
}

/* Busy cores and GPUs over time: the fraction of all of them in each
 * bucket. */
static json_t *util(const struct pl_report *r, double t0, double t1)
{
    size_t nb = UTIL_BUCKETS;
    double dt = (t1 - t0) / nb;
    double *c = calloc(nb, sizeof(*c)), *g = calloc(nb, sizeof(*g));
    json_t *jc = json_array(), *jg = json_array(), *out = NULL;

    for (size_t i = 0; c && g && i < r->nbars; i++) {
        const struct pl_rbar *b = &r->bars[i];
        for (uint32_t k = 0; k < b->nrows; k++)
            spread(r->rows[b->rows[k]].gpu ? g : c, nb, t0, dt, b->start,
                   bar_end(r, b), 1);
    }
    for (size_t k = 0; c && g && k < nb; k++) {
        json_array_append_new(jc, real_or_null(r->ncores ? c[k] / dt
                                                   / r->ncores : NAN));
        json_array_append_new(jg, real_or_null(r->ngpus ? g[k] / dt
                                                   / r->ngpus : NAN));
    }
    if (c && g)
        out = json_pack("{s:f, s:f, s:O, s:O}", "t0", t0, "dt", dt, "cores",
                        jc, "gpus", jg);
    json_decref(jc);
    json_decref(jg);
    free(c);
    free(g);
    return out;
}

json_t *pl_report_summary(const struct pl_report *r)
{
    json_t *out = json_object(), *states = json_object();
    double *waits = malloc((r->ntasks + 1) * sizeof(double));
    double *runs = malloc((r->ntasks + 1) * sizeof(double));
    size_t nw = 0, nr = 0;
    double t0 = 0, t1 = 1;

    if (!out || !states || !waits || !runs)
        goto error;
    for (size_t i = 0; i < r->ntasks; i++) {
        const struct pl_rtask *t = &r->tasks[i];
        json_t *c = json_object_get(states, t->state);
        json_object_set_new(states, t->state,
                            json_integer(json_integer_value(c) + 1));
        if (!isnan(t->start) && t->start >= t->submit)
            waits[nw++] = t->start - t->submit;
        if (!isnan(wall(t)) && wall(t) >= 0)
            runs[nr++] = wall(t);
    }
    bool any = pl_report_span(r, &t0, &t1);
    json_object_set_new(out, "tasks", json_integer((json_int_t)r->ntasks));
    json_object_set_new(out, "ranks_run", json_integer((json_int_t)r->nbars));
    json_object_set_new(out, "states", states);
    states = NULL;
    json_object_set_new(out, "span", any ? json_pack("[f,f]", t0, t1)
                                         : json_null());
    json_object_set_new(out, "cores", json_integer((json_int_t)r->ncores));
    json_object_set_new(out, "gpus", json_integer((json_int_t)r->ngpus));
    json_object_set_new(out, "wait_hist", pl_report_hist(waits, nw,
                                                         HIST_BINS));
    json_object_set_new(out, "run_hist", pl_report_hist(runs, nr, HIST_BINS));
    json_object_set_new(out, "slowest", slowest(r));
    json_object_set_new(out, "failures", failures(r));
    json_object_set_new(out, "util", any ? util(r, t0, t1) : json_null());
    if (tables(r, out) < 0)
        goto error;
    free(waits);
    free(runs);
    return out;
error:
    json_decref(out);
    json_decref(states);
    free(waits);
    free(runs);
    return NULL;
}
