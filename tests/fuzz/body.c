/* tests/fuzz/body.c - run every body decoder of the protocol on one body
 *
 * Every decoder is proto/'s (the wire is defined there and nowhere
 * else), so the fuzzers link libpl alone.  What the agent builds from a
 * RUN entry it accepted is replayed over the corpus by
 * tests/unit/test_agent_corpus.c.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proto/agentmsg.h"
#include "proto/allocmsg.h"
#include "proto/clientmsg.h"
#include "proto/error.h"
#include "proto/mpjson.h"
#include "proto/msg.h"
#include "proto/poolmsg.h"
#include "proto/run.h"
#include "proto/spec.h"
#include "proto/state.h"
#include "proto/strv.h"
#include "proto/vetmsg.h"
#include "proto/tlmsg.h"
#include "proto/watchmsg.h"
#include "tests/fuzz/body.h"
#include "tests/fuzz/check.h"

/* pilotd keeps a spec's strings as JSON (argv, env in the database) and
 * answers list and show in JSON: each must be a JSON string. */
static bool json_ok(const char *s)
{
    json_t *j;

    if (!s)
        return true;
    if (!(j = json_string(s)))
        return false;
    json_decref(j);
    return true;
}

/* -1 must come with errno and a text for a person. */
static void check_refusal(int rc, const struct pl_error *e)
{
    if (rc < 0)
        CHECK(errno != 0 && e->text[0] != '\0');
}

/* ---- client requests, as pilotd reads them (daemon/clients.c) ---- */

static void submit(const msgpack_object *body)
{
    const msgpack_object *arr = NULL;
    struct pl_error e = { "" };

    errno = 0;
    int rc = pl_submit_decode(body, &arr, &e);
    check_refusal(rc, &e);
    if (rc < 0)
        return;
    CHECK(arr->via.array.size >= 1
          && arr->via.array.size <= PL_SPEC_MAX_SUBMIT);
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        struct pl_spec s;
        e.text[0] = '\0';
        errno = 0;
        rc = pl_spec_decode(&arr->via.array.ptr[i], &s, &e);
        check_refusal(rc, &e);
        if (rc == 0) {
            CHECK(s.argv && s.argv[0] && s.argv[0][0]);
            CHECK(s.ranks >= 1 && s.ranks <= PL_SPEC_MAX_RANKS && s.cpr >= 1);
            CHECK(isfinite(s.timeout) && s.timeout >= 0
                  && s.timeout <= PL_SPEC_MAX_TIMEOUT);
            CHECK(s.nodes <= s.ranks);
            CHECK(s.comm >= PL_COMM_NONE && s.comm <= PL_COMM_MPI);
            CHECK(s.launcher == PL_LAUNCHER_UNSET || s.comm == PL_COMM_MPI);
            for (char **p = s.env; p && *p; p++)
                CHECK(strchr(*p, '=') && **p != '=' && json_ok(*p));
            for (char **p = s.argv; *p; p++)
                CHECK(json_ok(*p));
            for (char **p = s.tags; p && *p; p++)
                CHECK(pl_spec_tag_key(*p) > 0 && json_ok(*p));
            CHECK(json_ok(s.name) && json_ok(s.cwd));
            CHECK(!s.array || pl_spec_count(&s) <= PL_SPEC_MAX_ARRAY);
        }
        else
            CHECK(!s.argv && !s.env && !s.name && !s.cwd && !s.after);
        pl_spec_clear(&s);
    }
}

static void queries(const msgpack_object *body)
{
    struct pl_error e = { "" };
    struct pl_list_req l;
    struct pl_sel_req s;
    struct pl_show_req sh;
    int rc;

    errno = 0;
    rc = pl_list_req_decode(body, &l, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        CHECK(!l.state || pl_state_parse(l.state) > 0);
        CHECK(l.sel.nids <= PL_REQ_MAX_IDS && l.sel.nelems <= PL_REQ_MAX_IDS);
        pl_list_req_clear(&l);
    }
    else
        CHECK(!l.state && !l.tags && !l.sel.ids && !l.sel.elems);
    errno = 0;
    rc = pl_sel_req_decode(body, &s, &e);
    check_refusal(rc, &e);
    pl_sel_req_clear(&s);
    errno = 0;
    rc = pl_show_req_decode(body, &sh, &e);
    check_refusal(rc, &e);
    struct pl_results_req rr;
    errno = 0;
    rc = pl_results_req_decode(body, &rr, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        CHECK(rr.nids >= 1 && rr.nids <= PL_RESULTS_MAX_IDS);
        for (uint32_t i = 0; i < rr.nids; i++)
            CHECK(rr.ids[i] >= 1 && rr.ids[i] <= INT64_MAX);
        pl_results_req_clear(&rr);
    }
    else
        CHECK(!rr.ids);
    struct pl_tl_req tl;
    errno = 0;
    rc = pl_tl_req_decode(body, &tl, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        for (char **p = tl.tags; p && *p; p++)
            CHECK(pl_spec_tag_key(*p) > 0);
        CHECK(isfinite(tl.since) && tl.since >= 0 && tl.limit <= PL_TL_PAGE);
        CHECK(!tl.name || strlen(tl.name) <= PL_SPEC_MAX_NAME);
        pl_tl_req_clear(&tl);
    }
    else
        CHECK(!tl.tags && !tl.name && !tl.sel.ids && !tl.sel.elems);
}

/* ---- agent messages, as pilotd reads them (daemon/agents.c) ---- */

static void reg(const msgpack_object *body)
{
    struct pl_register r;
    struct pl_error e = { "" };

    errno = 0;
    int rc = pl_register_decode(body, &r, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        CHECK(r.node && pl_node_name_ok(r.node));
        CHECK(!strpbrk(r.node, ",: \t\n;"));
        CHECK(r.ncpu >= 1 && r.ncpu <= PL_REG_MAX_CPUS && r.cpu);
        for (uint32_t i = 0; i < r.ncpu; i++)
            for (uint32_t j = 0; j < i; j++)
                CHECK(r.cpu[i] != r.cpu[j]);
        for (char **g = r.gpus; g && *g; g++) {
            CHECK(**g && !strpbrk(*g, ",;"));
            for (char **h = r.gpus; h < g; h++)
                CHECK(strcmp(*g, *h) != 0);
        }
        for (uint32_t i = 0; i < r.nended; i++)
            CHECK(pl_state_name(r.ended[i].state) != NULL);
        CHECK(r.job <= UINT32_MAX && isfinite(r.job_end)
              && r.job_end >= 0 && r.job_end <= 1e11);
    }
    else
        CHECK(!r.node && !r.cpu && !r.gpus && !r.running && !r.ended);
    pl_register_clear(&r);
}

static void events(const msgpack_object *body)
{
    const msgpack_object *arr = NULL;
    struct pl_error e = { "" };
    struct pl_pull p;
    uint64_t acked;

    (void)pl_pull_decode(body, &p, &e);
    (void)pl_ack_decode(body, &acked, &e);
    if (pl_events_decode(body, &arr, &e) < 0)
        return;
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        struct pl_event ev;
        errno = 0;
        int rc = pl_event_decode(&arr->via.array.ptr[i], &ev, &e);
        check_refusal(rc, &e);
        if (rc == 0) {
            CHECK(pl_state_name(ev.state) && ev.attempt <= UINT32_MAX
                  && ev.rank <= UINT32_MAX);
            CHECK(ev.exit_code >= -1 && ev.exit_code <= INT32_MAX);
            CHECK(ev.signal >= -1 && ev.signal <= 255);
            CHECK(ev.time == 0 || (isfinite(ev.time) && ev.time > 0));
            CHECK(json_ok(ev.error));
        }
        else
            CHECK(ev.state == 0 && !ev.error);
        pl_event_clear(&ev);
    }
}

/* ---- pilotd's messages, as the agent reads them (agent/) ---- */

static void run(const msgpack_object *body)
{
    const msgpack_object *tasks = NULL;
    struct pl_error e = { "" };

    if (pl_run_msg_decode(body, &tasks, &e) < 0)
        return;
    for (uint32_t i = 0; i < tasks->via.array.size; i++) {
        struct pl_run s;
        bool have_id;
        errno = 0;
        e.text[0] = '\0';
        int rc = pl_run_decode(&tasks->via.array.ptr[i], &s, &have_id, &e);
        check_refusal(rc, &e);
        if (rc == 0) {
            CHECK(have_id && s.argv && s.argv[0]
                  && (s.ncores >= 1 || s.pool || s.prefetch >= 1));
            /* a prefetched entry (protocol 13): no cores yet, one rank
             * of a plain command */
            if (s.prefetch)
                CHECK(s.ncores == 0 && s.ngpus == 0 && s.size == 1
                      && !s.pool && s.comm == PL_COMM_NONE
                      && s.fn == PL_FN_NONE);
            if (s.pool)
                CHECK(s.group && s.group[s.rank] == s.world_rank
                      && pl_pool_name_ok(s.pool) && s.comm == PL_COMM_NONE);
            CHECK(s.size >= 1 && s.rank < s.size);
            CHECK(s.local_size >= 1 && s.local_rank < s.local_size
                  && s.local_size <= s.size);
            CHECK(s.out && s.out[0] && s.err && s.err[0]);
            CHECK(isfinite(s.timeout) && s.timeout >= 0);
            if (s.comm == PL_COMM_TORCH)
                CHECK(s.master_addr && s.master_addr[0] && s.master_port);
            if (s.comm == PL_COMM_MPI)
                CHECK(s.hosts && pl_strv_len(s.hosts) == s.size
                      && s.rank_cores);
            CHECK(s.nrefs <= PL_SPEC_MAX_REFS
                  && (!s.nrefs || s.input || s.input_file));
            for (uint32_t k = 0; k < s.nrefs; k++) {
                const struct pl_run_ref *f = &s.refs[k];
                CHECK(f->id >= 1 && f->ndata <= PL_PY_RESULT_INLINE);
                CHECK(!(f->data && f->file)
                      && (f->status == PL_PYR_NONE) == (!f->data && !f->file));
                CHECK(!f->file || f->file[0] == '/');
            }
        }
        pl_run_clear(&s);
    }
}

static void agent_msgs(const msgpack_object *body)
{
    struct pl_error e = { "" };
    struct pl_welcome wl;
    struct pl_kill k;

    errno = 0;
    int rc = pl_welcome_decode(body, &wl, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        CHECK(pl_node_name_ok(wl.node) && wl.instance);
        CHECK(wl.heartbeat > 0 && wl.heartbeat <= PL_HEARTBEAT_MAX);
        pl_welcome_clear(&wl);
    }
    else
        CHECK(!wl.node && !wl.instance);
    errno = 0;
    rc = pl_kill_decode(body, &k, &e);
    check_refusal(rc, &e);
    if (rc == 0)
        CHECK(isfinite(k.grace) && k.grace >= 0
              && k.grace <= PL_KILL_GRACE_MAX && k.attempt <= UINT32_MAX);
}

/* ---- a reply, as the CLI and the agent read it (proto/rpc.c) ---- */

static void reply(const msgpack_object *body)
{
    struct pl_error e;
    char *text = NULL;
    int64_t errnum;
    const msgpack_object *data;

    if (pl_reply_decode(body, &errnum, &text, &data, &e) < 0)
        return;
    free(text);
    if (data) {
        json_t *j = pl_mpjson_to_json(data);
        if (j) {
            char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
            free(s);
        }
        json_decref(j);
    }
}

/* ---- pools: requests (pilotd), HELLO reports (pilotd), a worker's
 * messages (the agent) and the agent's CALL (a worker) ---- */

static void pools(const msgpack_object *body)
{
    static const int types[] = { PL_MSG_POOL_START, PL_MSG_POOL_STOP,
                                 PL_MSG_POOL_LIST };
    struct pl_error e = { "" };
    int rc;

    for (size_t i = 0; i < 3; i++) {
        struct pl_pool_req pr;
        errno = 0;
        rc = pl_pool_req_decode(body, types[i], &pr, &e);
        check_refusal(rc, &e);
        if (rc == 0 && types[i] != PL_MSG_POOL_LIST)
            CHECK(pl_pool_name_ok(pr.name));
        if (rc == 0 && types[i] == PL_MSG_POOL_START) {
            CHECK(pr.rpn >= 1 && pr.cpr >= 1
                  && pr.nodes * pr.rpn <= PL_POOL_MAX_WORKERS);
            for (char **p = pr.env; p && *p; p++)
                CHECK(strchr(*p, '=') && **p != '=' && json_ok(*p));
        }
        if (rc == 0)
            pl_pool_req_clear(&pr);
        else
            CHECK(!pr.env);
    }
    struct pl_pool_ready rdy;
    errno = 0;
    rc = pl_pool_ready_decode(body, &rdy, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        CHECK(rdy.nranks >= 1 && rdy.nranks <= PL_POOL_MAX_WORKERS);
        for (uint32_t i = 0; i < rdy.nranks; i++)
            CHECK(rdy.ranks[i] < PL_POOL_MAX_WORKERS);
    }
    pl_pool_ready_clear(&rdy);
    struct pl_whello h;
    errno = 0;
    rc = pl_whello_decode(body, &h, &e);
    check_refusal(rc, &e);
    if (rc == 0)
        CHECK(pl_pool_name_ok(h.pool) && h.world_rank < h.world_size
              && h.pid > 0);
    pl_whello_clear(&h);
    struct pl_wcall c;
    errno = 0;
    rc = pl_wcall_decode(body, &c, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        CHECK(c.rank < c.size && c.group && c.argv && c.argv[0]
              && strchr(c.argv[0], ':') && c.out && c.err);
        CHECK(c.fn == PL_FN_C || c.fn == PL_FN_PY);
        for (uint64_t i = 0; i < c.size; i++)
            CHECK(c.group[i] < PL_POOL_MAX_WORKERS);
    }
    pl_wcall_clear(&c);
    struct pl_wentered en;
    errno = 0;
    rc = pl_wentered_decode(body, &en, &e);
    check_refusal(rc, &e);
    if (rc == 0)
        CHECK(isfinite(en.time) && en.time >= 0);
    struct pl_wreturn rt;
    errno = 0;
    rc = pl_wreturn_decode(body, &rt, &e);
    check_refusal(rc, &e);
    if (rc == 0)
        CHECK(rt.code >= 0 && rt.code <= 255 && isfinite(rt.time)
              && (!rt.error || pl_utf8_str(rt.error)));
    pl_wreturn_clear(&rt);
    int64_t sig = -1;
    errno = 0;
    rc = pl_wcrash_decode(body, &sig, &e);
    check_refusal(rc, &e);
    if (rc == 0)
        CHECK(sig >= 0 && sig <= 64);
}

/* ---- watches: WATCH and UNWATCH (pilotd), a submit's 'watch'
 * (pilotd), a WATCH reply's data and the ENDS push (the CLI) ---- */

static void watches(const msgpack_object *body)
{
    struct pl_error e = { "" };
    struct pl_watch_req q;
    char token[PL_WATCH_TOKEN_MAX + 1];
    int rc;

    errno = 0;
    rc = pl_watch_req_decode(body, &q, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        CHECK(pl_watch_token_ok(q.token));
        CHECK(!(q.all && pl_sel_req_given(&q.sel)));
        CHECK(q.sel.nids <= PL_REQ_MAX_IDS && q.sel.nelems <= PL_REQ_MAX_IDS);
        CHECK(!q.has_after || q.after <= INT64_MAX);
        pl_watch_req_clear(&q);
    }
    else
        CHECK(!q.sel.ids && !q.sel.elems);
    errno = 0;
    rc = pl_unwatch_decode(body, token, &e);
    check_refusal(rc, &e);
    if (rc == 0)
        CHECK(pl_watch_token_ok(token));
    errno = 0;
    rc = pl_submit_watch_decode(body, token, &e);
    check_refusal(rc, &e);
    CHECK(rc != 1 || pl_watch_token_ok(token));
    CHECK(rc != 0 || !token[0]);
    struct pl_watch_reply wr;
    errno = 0;
    rc = pl_watch_reply_decode(body, &wr, &e);
    check_refusal(rc, &e);
    if (rc == 0)
        CHECK(pl_watch_token_ok(wr.token));
    struct pl_ends en;
    errno = 0;
    rc = pl_ends_decode(body, &en, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        CHECK(pl_watch_token_ok(en.token) && en.n >= 1
              && en.nends <= PL_ENDS_MAX);
        for (uint32_t i = 0; i < en.nends; i++) {
            const struct pl_end *x = &en.ends[i];
            CHECK(x->seq >= 1 && x->id >= 1 && pl_state_final(x->state));
            CHECK(i == 0 || x->seq > en.ends[i - 1].seq);
            CHECK(x->exit_code >= -1 && x->signal >= -1 && x->signal <= 255);
            CHECK(isfinite(x->end_time) && x->end_time >= 0);
            CHECK(!x->reason || strlen(x->reason) <= PL_END_REASON_MAX);
            CHECK(x->result_size <= PL_END_RESULT_MAX
                  && (!x->result_size || x->result));
        }
        pl_ends_clear(&en);
    }
    else
        CHECK(!en.ends);
}

/* node vetting: VET, VET_RESULT, the VET and CORDON requests */
static void vetting(const msgpack_object *body)
{
    struct pl_error e;
    struct pl_vetconf c;
    struct pl_vet_result r;
    struct pl_vet_req q;
    struct pl_cordon_req cr;
    uint64_t token;
    int rc;

    errno = 0;
    rc = pl_vet_decode(body, &token, &c, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        CHECK(isfinite(c.timeout) && c.timeout > 0
              && c.timeout <= PL_VET_TIMEOUT_MAX);
        CHECK(!c.cpu || (c.cpu_iterations && c.cpu_slices));
        CHECK(!c.gpu_devices || strstr(c.gpu_devices, "%s"));
        for (uint32_t i = 0; i < c.next; i++)
            CHECK(pl_vet_name_ok(c.ext[i].name) && c.ext[i].argv
                  && c.ext[i].argv[0]);
        pl_vetconf_clear(&c);
    }
    errno = 0;
    rc = pl_vet_result_decode(body, &r, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        bool all = true;
        CHECK(r.node && r.ncheck <= PL_VET_MAX_CHECKS && r.time > 0
              && isfinite(r.time));
        for (uint32_t i = 0; i < r.ncheck; i++) {
            CHECK(pl_vet_name_ok(r.check[i].name));
            CHECK(!r.check[i].detail || pl_utf8_str(r.check[i].detail));
            all = all && r.check[i].ok;
        }
        CHECK(!r.ok || all);
        pl_vet_result_clear(&r);
    }
    else
        CHECK(!r.node && !r.check);
    errno = 0;
    rc = pl_vet_req_decode(body, &q, &e);
    check_refusal(rc, &e);
    pl_vet_req_clear(&q);
    errno = 0;
    rc = pl_cordon_req_decode(body, &cr, &e);
    check_refusal(rc, &e);
    if (rc == 0)
        CHECK(cr.node && (!cr.reason
                          || strlen(cr.reason) <= PL_CORDON_REASON_MAX));
    pl_cordon_req_clear(&cr);
}

/* pilot grow: GROW and SHRINK (what reaches a batch script) */
static void allocs(const msgpack_object *body)
{
    struct pl_error e;
    struct pl_grow_req g;
    struct pl_shrink_req s;
    int rc;

    errno = 0;
    rc = pl_grow_req_decode(body, &g, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        CHECK(g.nodes >= 1 && g.nodes <= PL_ALLOC_MAX_NODES);
        CHECK(!g.time || pl_alloc_time_ok(g.time));
        CHECK(!g.partition || pl_alloc_part_ok(g.partition));
        CHECK(isfinite(g.drain));
        pl_grow_req_clear(&g);
    }
    else
        CHECK(!g.time && !g.partition);
    errno = 0;
    rc = pl_shrink_req_decode(body, &s, &e);
    check_refusal(rc, &e);
    if (rc == 0)
        CHECK((s.idle >= 0) != (s.alloc > 0) && isfinite(s.idle));
}

void fuzz_body(const msgpack_object *body)
{
    submit(body);
    queries(body);
    reg(body);
    events(body);
    run(body);
    agent_msgs(body);
    reply(body);
    pools(body);
    watches(body);
    vetting(body);
    allocs(body);
}
