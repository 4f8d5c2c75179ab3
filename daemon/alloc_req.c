/* daemon/alloc_req.c - the requests GROW, SHRINK and ALLOCS, status's
 * allocations, and the table's life: taken back from the database at
 * boot, cancelled when the pilot stops (docs/grow.md) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/alloc_private.h"
#include "daemon/child.h"
#include "daemon/slurmjob.h"
#include "proto/log.h"
#include "proto/strv.h"

#define SHOW_ENDED 20       /* ended allocations status lists at most */

/* ------------------------------------------------------------ requests */

void pl_alloc_grow_req(struct pl_daemon *d, const struct pl_req *r,
                       const struct pl_msg *m)
{
    struct pl_grow_req q;
    struct pl_error err;
    struct pl_alloc *a;

    if (pl_grow_req_decode(m->body, &q, &err) < 0) {
        pl_out_err(d, r, errno, err.text);
        return;
    }
    if (d->cfg.local || !d->allocs)
        pl_out_err(d, r, ENOTSUP, "a --local pilot cannot grow: it has no "
                   "Slurm job");
    else if (d->stopping || d->draining)
        pl_out_err(d, r, ESHUTDOWN, "the pilot is stopping");
    else if (!pl_store_refused(d, r)) {
        if (!(a = alloc_submit(d, q.nodes, q.time, q.partition, q.drain,
                               false, &err)))
            pl_out_err(d, r, errno ? errno : EIO, err.text);
        else {
            /* answered when sbatch has */
            a->reply = true;
            memcpy(a->rid, r->rid, r->ridlen);
            a->ridlen = r->ridlen;
            a->seq = r->seq;
        }
    }
    pl_grow_req_clear(&q);
}

void pl_alloc_shrink_req(struct pl_daemon *d, const struct pl_req *r,
                         const struct pl_msg *m)
{
    struct pl_allocs *s = d->allocs;
    struct pl_shrink_req q;
    struct pl_error err;
    struct pl_alloc *a;
    char why[96];

    if (pl_shrink_req_decode(m->body, &q, &err) < 0) {
        pl_out_err(d, r, errno, err.text);
        return;
    }
    if (!s) {
        pl_out_json(d, r, json_pack("{s:[]}", "released"));
        return;
    }
    if (pl_store_refused(d, r))
        return;
    json_t *done = json_array();
    if (q.alloc) {
        if (!(a = alloc_find(s, q.alloc))) {
            json_decref(done);
            pl_out_err(d, r, ENOENT, "no such allocation");
            return;
        }
        if (alloc_live(a)) {
            alloc_leave(a, "released (pilot shrink)");
            json_array_append_new(done, json_integer((json_int_t)a->id));
        }
    }
    else {
        for (size_t i = 0; i < s->n; i++) {
            a = s->v[i];
            double for_s = a->idle_since ? pl_mono() - a->idle_since : 0;
            if (!alloc_live(a) || a->sbatch || !a->idle_since
                || (a->state != A_RUNNING && a->state != A_DRAINING)
                || for_s < q.idle)
                continue;
            snprintf(why, sizeof(why), "released idle after %.0f s (pilot "
                     "shrink)", for_s);
            alloc_leave(a, why);
            json_array_append_new(done, json_integer((json_int_t)a->id));
        }
    }
    pl_out_json(d, r, json_pack("{s:o}", "released", done));
}

json_t *pl_alloc_status(const struct pl_daemon *d)
{
    const struct pl_allocs *s = d->allocs;
    json_t *v = json_array();
    size_t ended = 0;

    /* the live ones, and the last few that ended */
    for (size_t i = s ? s->n : 0; i-- > 0;) {
        const struct pl_alloc *a = s->v[i];
        if (!alloc_live(a) && ended++ >= SHOW_ENDED)
            continue;
        json_t *j = alloc_json(a);
        double left = a->end_time > 0 && alloc_live(a) ? a->end_time - pl_now()
                                                 : -1;
        json_object_set_new(j, "time_left", left >= 0 ? json_real(left)
                                                      : json_null());
        json_object_set_new(j, "idle", a->idle_since && alloc_live(a)
                                           ? json_real(pl_mono()
                                                       - a->idle_since)
                                           : json_null());
        json_array_insert_new(v, 0, j);
    }
    return v;
}

void pl_alloc_list_req(struct pl_daemon *d, const struct pl_req *r,
                       const struct pl_msg *m)
{
    const struct pl_allocs *s = d->allocs;
    (void)m;

    pl_out_json(d, r, json_pack("{s:o, s:o}", "allocs", pl_alloc_status(d),
                                "grow", s && s->grow
                                            ? json_pack("{s:i, s:f, s:i, s:i}",
                                                        "max", s->conf.max,
                                                        "idle", s->conf.idle,
                                                        "nodes", s->conf.nodes,
                                                        "pending",
                                                        s->conf.pending)
                                            : json_null()));
}

/* ------------------------------------------------------------ boot */

static double jnum(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

static const char *jstr(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* One meta row alloc.N of the pilotd before. */
static int load_cb(const char *key, const char *val, void *arg)
{
    struct pl_daemon *d = arg;
    struct pl_allocs *s = d->allocs;
    json_t *j = json_loads(val, 0, NULL), *names, *v;
    struct pl_alloc *a;
    size_t i;
    (void)key;

    if (!j)
        return 0; /* not ours to judge: skipped */
    if (!(a = alloc_new(d))) {
        json_decref(j);
        return -1;
    }
    a->id = (uint64_t)jnum(j, "id");
    if (a->id >= s->next)
        s->next = a->id + 1;
    a->job = (long)jnum(j, "job");
    a->state = A_ENDED;
    for (int k = A_PENDING; k <= A_ENDED; k++)
        if (!strcmp(jstr(j, "state"), alloc_state_names[k]))
            a->state = k;
    a->automatic = json_is_true(json_object_get(j, "auto"));
    a->joined = json_is_true(json_object_get(j, "joined"));
    a->nodes = (uint32_t)jnum(j, "nodes");
    snprintf(a->time, sizeof(a->time), "%s", jstr(j, "time"));
    snprintf(a->partition, sizeof(a->partition), "%s", jstr(j, "partition"));
    snprintf(a->why, sizeof(a->why), "%s", jstr(j, "why"));
    a->drain = jnum(j, "drain");
    a->submitted = jnum(j, "submitted");
    a->started = jnum(j, "started");
    a->ended = jnum(j, "ended");
    a->end_time = jnum(j, "end_time");
    names = json_object_get(j, "names");
    json_array_foreach(names, i, v)
        if (json_is_string(v) && alloc_add_name(a, json_string_value(v)) < 0) {
            json_decref(j);
            return -1;
        }
    /* its sbatch died with the pilotd before: the job id is lost */
    if (alloc_live(a) && a->job <= 0)
        a->state = A_ENDED;
    json_decref(j);
    return 0;
}

int pl_alloc_boot(struct pl_daemon *d, struct pl_error *errp)
{
    struct pl_allocs *s;

    if (!(s = calloc(1, sizeof(*s)))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    s->next = 1;
    d->allocs = s;
    if (d->cfg.grow) {
        if (d->cfg.local) {
            errno = EINVAL;
            return pl_errprintf(errp, "--grow: a --local pilot cannot grow");
        }
        if (pl_grow_conf_parse(d->cfg.grow, &s->conf, errp) < 0)
            return -1;
        s->grow = true;
    }
    if (pl_db_meta_list(d->db, "alloc.", load_cb, d, errp) < 0)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += alloc_live(s->v[i]);
    if (s->n)
        pl_log(LOG_NOTICE, "%zu allocations taken back (%zu live)", s->n, n);
    return 0;
}

void pl_alloc_stop(struct pl_daemon *d)
{
    struct pl_allocs *s = d->allocs;
    struct pl_error err;

    for (size_t i = 0; s && i < s->n; i++) {
        struct pl_alloc *a = s->v[i];
        if (!alloc_live(a))
            continue;
        if (a->job > 0 && pl_slurmjob_cancel(a->job, &err) < 0)
            pl_log(LOG_WARNING, "allocation %llu: %s",
                   (unsigned long long)a->id, err.text);
        alloc_set_state(a, A_ENDED, "the pilot stopped");
    }
}

void pl_alloc_free(struct pl_daemon *d)
{
    struct pl_allocs *s = d->allocs;

    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        pl_child_free(s->v[i]->sbatch);
        pl_strv_free(s->v[i]->names);
        free(s->v[i]);
    }
    free(s->v);
    free(s->want);
    free(s);
    d->allocs = NULL;
}
