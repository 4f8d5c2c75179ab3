/* daemon/vet.c - node vetting: VET sent to the agents, their results
 * judged and stored, failed nodes cordoned, `pilot vet` and `pilot
 * cordon|uncordon`
 *
 * A node is vetted when its agent first registers (cordoned "vetting"
 * until the result comes, so nothing starts on a node not checked yet),
 * on `pilot vet`, when ranks there end by a signal 'revet.signals'
 * times within 'revet.window_s', and when a --vetted task would take it
 * but for the age of its passed vetting.  The agent runs the checks
 * (agent/vetcheck.c); one pilotd judges the one check that needs all
 * the nodes: a node whose CPU figure is more than 'cpu.max_slower_pct'
 * below the median of the nodes' fails.  A failed node is cordoned
 * ("vet: CHECK FIGURE UNIT (limit LIMIT)"); a passing vetting lifts a
 * vetting's cordon, never one given by hand.  Each result is stored with
 * the node (nodes.cordon, vet, vet_time) and taken back after a restart.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_private.h"
#include "proto/log.h"
#include "proto/query.h"
#include "proto/strv.h"
#include "proto/vetconf.h"
#include "proto/vetmsg.h"

#define WAIT_GRACE 10.0  /* s a `pilot vet` waits beyond the checks' timeout */
#define VETTING "vetting" /* the cordon of a node being vetted first */

/* A `pilot vet` waiting for its nodes' results. */
struct pl_vetwait {
    unsigned char rid[256];
    size_t ridlen;
    uint64_t seq;
    double deadline;             /* pl_mono() */
    size_t n;
    struct vw_ent {
        struct pl_node *node;    /* borrowed: the scheduler's */
        uint64_t token;
        bool done;
    } e[];
};

int pl_vet_boot(struct pl_daemon *d, struct pl_error *errp)
{
    char path[PL_PATH_MAX + 16];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", d->dir, PL_VETCONF_FILE);
    if (!(fp = fopen(path, "re"))) {
        if (errno != ENOENT)
            return pl_errprintf(errp, "%s: %s", path, strerror(errno));
        if (pl_vetconf_default(&d->vetconf) < 0)
            return pl_errprintf(errp, "out of memory");
    }
    else {
        fclose(fp);
        if (pl_vetconf_load(path, &d->vetconf, errp) < 0)
            return -1;
    }
    d->vet_on = !pl_vetconf_empty(&d->vetconf);
    d->vet_restore = d->recovering;
    pl_log(LOG_NOTICE, "node vetting %s%s", d->vet_on ? "on" : "off",
           fp ? " (vet.yaml)" : " (the built-in checks)");
    return 0;
}

void pl_vet_free(struct pl_daemon *d)
{
    for (size_t i = 0; i < d->nvetwaits; i++)
        free(d->vetwaits[i]);
    free(d->vetwaits);
    d->vetwaits = NULL;
    d->nvetwaits = 0;
    pl_vetconf_clear(&d->vetconf);
}

static const char *state_name(int st)
{
    switch (st) {
    case PL_VET_RUNNING: return "running";
    case PL_VET_OK: return "ok";
    case PL_VET_FAILED: return "failed";
    default: return "none";
    }
}

/* Write the node's cordon and vetting to its row. */
static void store(struct pl_daemon *d, struct pl_node *n)
{
    struct pl_error err;

    if (pl_db_node_vet_set(d->db, n->name, n->cordon, n->vet_json,
                           n->vet_time, &err) < 0)
        pl_log(LOG_ERR, "node %s: %s", n->name, err.text);
}

static void set_cordon(struct pl_node *n, const char *why, bool by_vet)
{
    char *c = why ? strdup(why) : NULL;

    if (why && !c)
        return; /* out of memory: as it was */
    free(n->cordon);
    n->cordon = c;
    n->vet_cordon = why && by_vet;
    pl_node_changed(n); /* the placement index */
}

/* Send VET to the agent of 'n'; its token, or 0 (not sent). */
static uint64_t send_vet(struct pl_daemon *d, struct pl_node *n)
{
    struct pl_out *o;

    if (!d->vet_on || n->state != PL_NODE_UP || !(o = pl_out_agent(d, n)))
        return 0;
    pl_vet_encode(&o->w, 0, ++d->vet_token, &d->vetconf);
    pl_out_push(d, o);
    n->vet_token = d->vet_token;
    if (n->vet != PL_VET_RUNNING)
        pl_log(LOG_INFO, "vetting %s", n->name);
    n->vet = PL_VET_RUNNING;
    return n->vet_token;
}

/* The first failed check of the result 'res' as a cordon's text, into
 * 'buf'. */
static void cordon_text(json_t *res, char *buf, size_t len)
{
    size_t i;
    json_t *c;

    snprintf(buf, len, "vet: failed");
    json_array_foreach(json_object_get(res, "checks"), i, c) {
        if (json_is_true(json_object_get(c, "ok")))
            continue;
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *unit = json_string_value(json_object_get(c, "unit"));
        const char *det = json_string_value(json_object_get(c, "detail"));
        json_t *fig = json_object_get(c, "figure");
        json_t *lim = json_object_get(c, "limit");
        char f[48] = "", l[64] = "";
        if (json_is_number(fig))
            snprintf(f, sizeof(f), " %g%s%s", json_number_value(fig),
                     unit ? " " : "", unit ? unit : "");
        if (json_is_number(lim))
            snprintf(l, sizeof(l), " (limit %g%s%s)", json_number_value(lim),
                     unit ? " " : "", unit ? unit : "");
        if (f[0])
            snprintf(buf, len, "vet: %s%s%s", name ? name : "?", f, l);
        else
            snprintf(buf, len, "vet: %s: %.160s", name ? name : "?",
                     det ? det : "failed");
        return;
    }
}

/* Judge 'n' by its result 'res' (ok set): state, cordon, stored. */
static void judge(struct pl_daemon *d, struct pl_node *n, json_t *res)
{
    char *text = json_dumps(res, JSON_COMPACT);
    bool ok = json_is_true(json_object_get(res, "ok"));
    char why[256];

    if (!text)
        return;
    free(n->vet_json);
    n->vet_json = text;
    if (ok) {
        n->vet = PL_VET_OK;
        n->vet_ok_time = n->vet_time;
        if (n->cordon && n->vet_cordon) {
            set_cordon(n, NULL, false);
            pl_log(LOG_NOTICE, "node %s passed its vetting: uncordoned",
                   n->name);
        }
        d->want_sched = true;
    }
    else {
        n->vet = PL_VET_FAILED;
        n->vet_ok_time = 0;
        cordon_text(res, why, sizeof(why));
        if (!n->cordon || n->vet_cordon) {
            set_cordon(n, why, true);
            pl_log(LOG_WARNING, "node %s cordoned: %s", n->name, why);
            d->want_sched = true; /* the pass takes back what it holds */
        }
    }
    store(d, n);
}

/* The check that needs every node: a node whose CPU figure is more than
 * cpu.max_slower_pct below the median of the nodes' fails it. */
static void cpu_compare(struct pl_daemon *d)
{
    size_t nn = pl_sched_nnodes(d->sched), k = 0;
    double fig[nn ? nn : 1], median, limit;

    for (size_t i = 0; i < nn; i++) {
        struct pl_node *n = pl_sched_node_at(d->sched, i);
        if (n->vet_cpu > 0)
            fig[k++] = n->vet_cpu;
    }
    if (k < 2)
        return;
    for (size_t i = 1; i < k; i++)
        for (size_t j = i; j > 0 && fig[j] < fig[j - 1]; j--) {
            double x = fig[j];
            fig[j] = fig[j - 1];
            fig[j - 1] = x;
        }
    median = k % 2 ? fig[k / 2] : (fig[k / 2 - 1] + fig[k / 2]) / 2;
    limit = median * (1 - d->vetconf.cpu_max_slower / 100);
    limit = round(limit * 10) / 10;
    for (size_t i = 0; i < nn; i++) {
        struct pl_node *n = pl_sched_node_at(d->sched, i);
        json_t *res, *c;
        size_t j;
        if (n->vet_cpu <= 0 || n->vet_cpu >= limit || !n->vet_json
            || !(res = json_loads(n->vet_json, 0, NULL)))
            continue;
        bool changed = false;
        json_array_foreach(json_object_get(res, "checks"), j, c) {
            const char *name = json_string_value(json_object_get(c, "name"));
            if (!name || strcmp(name, "cpu")
                || !json_is_true(json_object_get(c, "ok")))
                continue;
            char det[200];
            snprintf(det, sizeof(det), "%g Mop/s: more than %g%% below the "
                     "median of %zu nodes (%g)", n->vet_cpu,
                     d->vetconf.cpu_max_slower, k, median);
            json_object_set_new(c, "ok", json_false());
            json_object_set_new(c, "limit", json_real(limit));
            json_object_set_new(c, "detail", json_string(det));
            changed = true;
        }
        if (changed) {
            json_object_set_new(res, "ok", json_false());
            judge(d, n, res);
        }
        json_decref(res);
    }
}

/* ------------------------------------------------------------ waiters */

static json_t *node_json(const struct pl_node *n, bool done)
{
    json_t *o = n->vet_json ? json_loads(n->vet_json, 0, NULL) : NULL;

    if (!o)
        o = json_object();
    json_object_set_new(o, "node", json_string(n->name));
    json_object_set_new(o, "state", json_string(done ? state_name(n->vet)
                                                     : "timeout"));
    json_object_set_new(o, "cordon", n->cordon ? json_string(n->cordon)
                                               : json_null());
    return o;
}

static void wait_reply(struct pl_daemon *d, size_t i)
{
    struct pl_vetwait *w = d->vetwaits[i];
    struct pl_req r = { w->rid, w->ridlen, w->seq, NULL };
    json_t *arr = json_array();

    for (size_t k = 0; k < w->n; k++)
        json_array_append_new(arr, node_json(w->e[k].node, w->e[k].done));
    pl_out_json(d, &r, arr);
    free(w);
    d->vetwaits[i] = d->vetwaits[--d->nvetwaits];
}

/* The result of VET 'token' on 'n' came: the waits for it are done. */
static void wait_done(struct pl_daemon *d, struct pl_node *n, uint64_t token)
{
    for (size_t i = d->nvetwaits; i-- > 0;) {
        struct pl_vetwait *w = d->vetwaits[i];
        bool all = true;
        for (size_t k = 0; k < w->n; k++) {
            if (w->e[k].node == n && w->e[k].token <= token)
                w->e[k].done = true;
            all = all && w->e[k].done;
        }
        if (all)
            wait_reply(d, i);
    }
}

void pl_vet_stop(struct pl_daemon *d)
{
    for (size_t i = 0; i < d->nvetwaits; i++) {
        struct pl_vetwait *w = d->vetwaits[i];
        struct pl_req r = { w->rid, w->ridlen, w->seq, NULL };
        pl_out_err(d, &r, ESHUTDOWN, "the pilot is stopping: no vetting "
                   "result");
        free(w);
    }
    d->nvetwaits = 0;
}

void pl_vet_tick(struct pl_daemon *d)
{
    double now = pl_mono();

    /* nodes a --vetted task would take but for their vetting's age */
    for (size_t i = 0; i < pl_sched_nnodes(d->sched); i++) {
        struct pl_node *n = pl_sched_node_at(d->sched, i);
        if (!n->vet_wanted)
            continue;
        n->vet_wanted = false;
        if (n->vet == PL_VET_OK && !n->cordon && send_vet(d, n))
            pl_log(LOG_INFO, "node %s: vetted again for a --vetted task",
                   n->name);
    }

    for (size_t i = d->nvetwaits; i-- > 0;) {
        struct pl_vetwait *w = d->vetwaits[i];
        /* a node lost meanwhile answers no more */
        for (size_t k = 0; k < w->n; k++)
            if (w->e[k].node->state != PL_NODE_UP)
                w->deadline = 0;
        if (now >= w->deadline)
            wait_reply(d, i);
    }
}

/* ------------------------------------------------------------ agents */

void pl_vet_joined(struct pl_daemon *d, struct pl_node *n, bool first)
{
    struct pl_error err;
    char *cordon = NULL, *vet = NULL;
    double vet_time = 0;
    json_t *res;

    if (first && d->vet_restore) {
        /* a restarted pilotd: the node's last vetting and cordon */
        if (pl_db_node_vet_get(d->db, n->name, &cordon, &vet, &vet_time,
                               &err) < 0)
            pl_log(LOG_ERR, "node %s: %s", n->name, err.text);
        if (cordon && strcmp(cordon, VETTING)) {
            free(n->cordon);
            n->cordon = cordon;
            n->vet_cordon = !strncmp(cordon, "vet: ", 5);
            pl_node_changed(n); /* the placement index */
            cordon = NULL;
        }
        if (vet && (res = json_loads(vet, 0, NULL))) {
            size_t i;
            json_t *c;
            n->vet = json_is_true(json_object_get(res, "ok")) ? PL_VET_OK
                                                               : PL_VET_FAILED;
            n->vet_time = vet_time;
            if (n->vet == PL_VET_OK)
                n->vet_ok_time = vet_time;
            json_array_foreach(json_object_get(res, "checks"), i, c)
                if (!strcmp(json_string_value(json_object_get(c, "name"))
                                ?: "", "cpu"))
                    n->vet_cpu = json_number_value(json_object_get(c,
                                                                  "figure"));
            json_decref(res);
            n->vet_json = vet;
            vet = NULL;
            pl_log(LOG_NOTICE, "node %s: its vetting of before the restart "
                   "(%s)%s%s", n->name, state_name(n->vet),
                   n->cordon ? ", cordoned: " : "",
                   n->cordon ? n->cordon : "");
        }
        free(cordon);
        free(vet);
    }
    if (!d->vet_on)
        return;
    /* vetted before (a restarted pilotd or agent): as it was; else, or
     * a VET the agent before this one did not answer, now */
    if (n->vet == PL_VET_NONE || n->vet == PL_VET_RUNNING) {
        if (!n->cordon) {
            set_cordon(n, VETTING, true);
            store(d, n);
        }
        send_vet(d, n);
    }
}

void pl_vet_result(struct pl_daemon *d, struct pl_node *n,
                   const struct pl_msg *m)
{
    struct pl_vet_result r;
    struct pl_error err;
    json_t *res, *checks;

    if (pl_vet_result_decode(m->body, &r, &err) < 0) {
        pl_daemon_bad_log(d, LOG_WARNING, "agent %s: bad vet result: %s",
                          n->name, err.text);
        return;
    }
    if (!r.token || r.token > n->vet_token) {
        pl_daemon_bad_log(d, LOG_WARNING, "agent %s: vet result of a VET "
                          "not sent to it (ignored)", n->name);
        pl_vet_result_clear(&r);
        return;
    }
    checks = json_array();
    n->vet_cpu = 0;
    for (uint32_t i = 0; i < r.ncheck; i++) {
        const struct pl_vet_check *c = &r.check[i];
        json_t *o = json_pack("{s:s, s:b}", "name", c->name, "ok", c->ok);
        if (isfinite(c->figure))
            json_object_set_new(o, "figure", json_real(c->figure));
        if (c->unit)
            json_object_set_new(o, "unit", json_string(c->unit));
        if (isfinite(c->limit))
            json_object_set_new(o, "limit", json_real(c->limit));
        if (c->detail)
            json_object_set_new(o, "detail", json_string(c->detail));
        json_array_append_new(checks, o);
        if (!strcmp(c->name, "cpu") && c->ok && isfinite(c->figure))
            n->vet_cpu = c->figure;
    }
    n->vet_time = pl_now();
    res = json_pack("{s:b, s:f, s:f, s:o}", "ok", r.ok, "time", n->vet_time,
                    "took", r.took, "checks", checks);
    pl_log(r.ok ? LOG_INFO : LOG_NOTICE, "node %s vetted in %.2f s: %s",
           n->name, r.took, r.ok ? "ok" : "failed");
    if (res) {
        judge(d, n, res);
        json_decref(res);
    }
    /* a newer VET is on its way: still running */
    if (r.token < n->vet_token)
        n->vet = PL_VET_RUNNING;
    cpu_compare(d);
    wait_done(d, n, r.token);
    pl_vet_result_clear(&r);
}

void pl_vet_rank_signal(struct pl_daemon *d, struct pl_node *n)
{
    uint32_t want = d->vetconf.revet_signals, k = 0;
    double now = pl_mono();
    const uint32_t max = sizeof(n->vet_sig) / sizeof(n->vet_sig[0]);

    if (!d->vet_on || want == 0)
        return;
    /* the ring of the last 'max' times; count those in the window */
    n->vet_sig[n->vet_nsig++ % max] = now;
    for (uint32_t i = 0; i < max && i < n->vet_nsig; i++)
        k += now - n->vet_sig[i] <= d->vetconf.revet_window;
    if (k < (want < max ? want : max) || n->vet == PL_VET_RUNNING)
        return;
    pl_log(LOG_WARNING, "node %s: %u ranks ended by a signal within %.0f s: "
           "vetting it again", n->name, k, d->vetconf.revet_window);
    memset(n->vet_sig, 0, sizeof(n->vet_sig));
    n->vet_nsig = 0;
    send_vet(d, n);
}

json_t *pl_vet_status(const struct pl_node *n)
{
    return pl_query_vet_status(state_name(n->vet), n->vet_time, n->cordon,
                               n->vet_json);
}

/* ------------------------------------------------------------ requests */

void pl_vet_req(struct pl_daemon *d, const struct pl_req *r,
                const struct pl_msg *m)
{
    struct pl_vet_req q;
    struct pl_error err;
    struct pl_vetwait *w = NULL;
    size_t nn = pl_sched_nnodes(d->sched), k = 0;
    char why[160];

    if (pl_vet_req_decode(m->body, &q, &err) < 0) {
        pl_out_err(d, r, errno, err.text);
        return;
    }
    if (!d->vet_on) {
        pl_out_err(d, r, ENOTSUP, "node vetting is off in this pilot "
                   "(its vet.yaml has enabled: false)");
        goto done;
    }
    size_t want = q.nodes ? pl_strv_len(q.nodes) : nn;
    if (pl_grow(&d->vetwaits, &d->capvetwaits, d->nvetwaits, 1,
                sizeof(*d->vetwaits)) < 0
        || !(w = calloc(1, sizeof(*w) + (want + 1) * sizeof(w->e[0])))) {
        pl_out_err(d, r, ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < want; i++) {
        struct pl_node *n = q.nodes ? pl_sched_node_find(d->sched, q.nodes[i])
                                    : pl_sched_node_at(d->sched, i);
        if (!n && q.nodes) {
            snprintf(why, sizeof(why), "no node '%s' in this pilot",
                     q.nodes[i]);
            pl_out_err(d, r, ENOENT, why);
            goto done;
        }
        if (n->state != PL_NODE_UP) {
            if (!q.nodes)
                continue;
            snprintf(why, sizeof(why), "node '%s' is not up", n->name);
            pl_out_err(d, r, EHOSTUNREACH, why);
            goto done;
        }
        bool dup = false;
        for (size_t j = 0; j < k && !dup; j++)
            dup = w->e[j].node == n;
        if (!dup)
            w->e[k++] = (struct vw_ent){ n, 0, false };
    }
    if (k == 0) {
        pl_out_json(d, r, json_array());
        goto done;
    }
    for (size_t i = 0; i < k; i++)
        if (!(w->e[i].token = send_vet(d, w->e[i].node)))
            w->e[i].done = true;
    w->n = k;
    memcpy(w->rid, r->rid, r->ridlen < sizeof(w->rid) ? r->ridlen
                                                       : sizeof(w->rid));
    w->ridlen = r->ridlen;
    w->seq = r->seq;
    w->deadline = pl_mono() + d->vetconf.timeout + WAIT_GRACE;
    d->vetwaits[d->nvetwaits++] = w;
    w = NULL;
done:
    free(w);
    pl_vet_req_clear(&q);
}

void pl_cordon_req(struct pl_daemon *d, const struct pl_req *r,
                   const struct pl_msg *m)
{
    struct pl_cordon_req q;
    struct pl_error err;
    struct pl_node *n;
    char why[160];

    if (pl_cordon_req_decode(m->body, &q, &err) < 0) {
        pl_out_err(d, r, errno, err.text);
        return;
    }
    if (!(n = pl_sched_node_find(d->sched, q.node))) {
        snprintf(why, sizeof(why), "no node '%s' in this pilot", q.node);
        pl_out_err(d, r, ENOENT, why);
        goto done;
    }
    /* what it was, so that the user hears of an uncordon that changed
     * nothing */
    json_t *was = n->cordon ? json_string(n->cordon) : json_null();
    if (q.uncordon) {
        if (n->cordon)
            pl_log(LOG_NOTICE, "node %s uncordoned (was: %s)", n->name,
                   n->cordon);
        set_cordon(n, NULL, false);
        d->want_sched = true;
    }
    else {
        set_cordon(n, q.reason ? q.reason : "pilot cordon", false);
        pl_log(LOG_NOTICE, "node %s cordoned: %s", n->name, n->cordon);
        d->want_sched = true; /* the pass takes back what it holds */
    }
    store(d, n);
    pl_out_json(d, r, json_pack("{s:s, s:o, s:o}", "node", n->name,
                                "cordon", n->cordon ? json_string(n->cordon)
                                                    : json_null(),
                                "was", was ? was : json_null()));
done:
    pl_cordon_req_clear(&q);
}
