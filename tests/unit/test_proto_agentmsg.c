/* tests/unit/test_proto_agentmsg.c - the messages of pilotd and its agents:
 * decoders refuse what they must, encoders round-trip */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "proto/agentmsg.h"
#include "proto/state.h"
#include "tests/mpw.h"
#include "proto/msg.h"
#include "tests/unit/helpers.h"


/* ---- register ---- */

static int reg_with(const char *node, const char *gpu, uint32_t ncores,
                    struct pl_register *r, struct pl_error *e)
{
    struct t_body b;
    uint64_t cores[] = { 0, 1, 2, 3 };
    char g[80];
    char *gpus[] = { g, NULL };
    const msgpack_object *o;
    int rc = -2;

    snprintf(g, sizeof(g), "%s", gpu ? gpu : "");
    t_body_begin(&b, PL_MSG_REGISTER, gpu ? 4 : 3);
    raw_kstr(&b.w.pk, "node", node);
    raw_kuint(&b.w.pk, "pid", 42);
    raw_kuintv(&b.w.pk, "cores", cores, ncores);
    if (gpu)
        raw_kstrv(&b.w.pk, "gpus", gpus);
    if ((o = t_body_end(&b)))
        rc = pl_register_decode(o, r, e);
    t_body_free(&b);
    return rc;
}

static void test_register(void)
{
    struct pl_register r;
    struct pl_error e = { "" };
    char long63[64], long64[65];

    is(reg_with("n1", "0", 4, &r, &e), 0, "register: a good one decodes");
    ok(!strcmp(r.node, "n1") && r.pid == 42 && r.ncpu == 4 && r.cpu[3] == 3
           && r.gpus && !strcmp(r.gpus[0], "0") && !r.gpus[1],
       "... node, pid, cores, gpus");
    pl_register_clear(&r);
    is(reg_with("Node-7.rack_2", NULL, 1, &r, &e), 0,
       "register: letters, digits, '.', '-', '_' are a node name");
    pl_register_clear(&r);
    memset(long63, 'a', 63);
    long63[63] = '\0';
    is(reg_with(long63, NULL, 1, &r, &e), 0, "register: a name of 63 bytes");
    pl_register_clear(&r);
    memset(long64, 'a', 64);
    long64[64] = '\0';

    /* names the run entries' readers would refuse, or that break a log
     * line: every multi-rank task placed there would fail */
    const char *badnames[] = { "", "a,b", "a b", "a:b", "a\nb", "a;b",
                               "a/b", long64 };
    for (size_t i = 0; i < sizeof(badnames) / sizeof(badnames[0]); i++) {
        errno = 0;
        e.text[0] = '\0';
        ok(reg_with(badnames[i], NULL, 1, &r, &e) == -1 && errno == EPROTO
               && !r.node && e.text[0],
           "register: node name #%zu refused (%s)", i, e.text);
    }
    const char *badgpus[] = { "", "0,1", "0;1", "a b", "\x7f" };
    for (size_t i = 0; i < sizeof(badgpus) / sizeof(badgpus[0]); i++) {
        errno = 0;
        ok(reg_with("n1", badgpus[i], 1, &r, &e) == -1 && errno == EPROTO
               && !r.gpus,
           "register: GPU id #%zu refused (%s)", i, e.text);
    }
    errno = 0;
    ok(reg_with("n1", NULL, 0, &r, &e) == -1 && errno == EPROTO,
       "register: no cores refused (%s)", e.text);

    /* the same core or GPU twice: pilotd would place two tasks on it */
    struct t_body b;
    uint64_t dup[] = { 3, 1, 3 };
    char g0[] = "0", g1[] = "0";
    char *gpus[] = { g0, g1, NULL };
    const msgpack_object *o;
    t_body_begin(&b, PL_MSG_REGISTER, 2);
    raw_kstr(&b.w.pk, "node", "n1");
    raw_kuintv(&b.w.pk, "cores", dup, 3);
    errno = 0;
    ok((o = t_body_end(&b)) && pl_register_decode(o, &r, &e) == -1
           && errno == EPROTO && !r.cpu,
       "register: a CPU id given twice refused (%s)", e.text);
    t_body_free(&b);
    t_body_begin(&b, PL_MSG_REGISTER, 3);
    raw_kstr(&b.w.pk, "node", "n1");
    raw_kuintv(&b.w.pk, "cores", dup, 2);
    raw_kstrv(&b.w.pk, "gpus", gpus);
    errno = 0;
    ok((o = t_body_end(&b)) && pl_register_decode(o, &r, &e) == -1
           && errno == EPROTO && !r.gpus,
       "register: a GPU id given twice refused (%s)", e.text);
    t_body_free(&b);
}

/* ---- events ---- */

static void test_event(void)
{
    struct t_body b;
    struct pl_event ev;
    struct pl_error e = { "" };
    const msgpack_object *o, *arr;

    t_body_begin(&b, PL_MSG_EVENTS, 1);
    raw_key(&b.w.pk, "events");
    msgpack_pack_array(&b.w.pk, 5);
    msgpack_pack_map(&b.w.pk, 7);
    raw_kuint(&b.w.pk, "id", 7);
    raw_kuint(&b.w.pk, "attempt", 1);
    raw_kuint(&b.w.pk, "rank", 2);
    raw_kstr(&b.w.pk, "state", "failed");
    raw_kdouble(&b.w.pk, "time", 12.5);
    raw_kint(&b.w.pk, "exit_code", 3);
    raw_kstr(&b.w.pk, "error", "spawn: no");
    msgpack_pack_map(&b.w.pk, 3); /* the least an event has */
    raw_kuint(&b.w.pk, "id", 8);
    raw_kuint(&b.w.pk, "attempt", 0);
    raw_kstr(&b.w.pk, "state", "running");
    msgpack_pack_uint64(&b.w.pk, 5); /* not a map */
    msgpack_pack_map(&b.w.pk, 3);
    raw_kuint(&b.w.pk, "id", 9);
    raw_kuint(&b.w.pk, "attempt", (uint64_t)UINT32_MAX + 1);
    raw_kstr(&b.w.pk, "state", "done");
    msgpack_pack_map(&b.w.pk, 6); /* numbers no process ends with */
    raw_kuint(&b.w.pk, "id", 10);
    raw_kuint(&b.w.pk, "attempt", 1);
    raw_kstr(&b.w.pk, "state", "failed");
    raw_kint(&b.w.pk, "exit_code", -15);
    raw_kint(&b.w.pk, "signal", 300);
    raw_kdouble(&b.w.pk, "time", -3.0);
    if (!(o = t_body_end(&b)) || !(arr = pl_mp_get(o, "events"))) {
        ok(0, "events body");
        t_body_free(&b);
        return;
    }
    const msgpack_object *v = arr->via.array.ptr;
    is(pl_event_decode(&v[0], &ev, &e), 0, "event: a full one");
    ok(ev.id == 7 && ev.attempt == 1 && ev.rank == 2
           && ev.state == PL_ST_FAILED && ev.time == 12.5
           && ev.exit_code == 3 && ev.signal == -1 && ev.maxrss_kb == -1
           && !strcmp(ev.error, "spawn: no"),
       "... every field");
    pl_event_clear(&ev);
    is(pl_event_decode(&v[1], &ev, &e), 0, "event: id, attempt, state");
    ok(ev.rank == 0 && ev.exit_code == -1 && ev.signal == -1 && !ev.error,
       "... defaults: rank 0, no exit code, signal or error");
    pl_event_clear(&ev);
    errno = 0;
    ok(pl_event_decode(&v[2], &ev, &e) == -1 && errno == EPROTO,
       "event: not a map refused (%s)", e.text);
    errno = 0;
    ok(pl_event_decode(&v[3], &ev, &e) == -1 && errno == EPROTO
           && ev.state == 0,
       "event: attempt > UINT32_MAX refused, event cleared (%s)", e.text);
    is(pl_event_decode(&v[4], &ev, &e), 0,
       "event: exit code -15, signal 300, time -3: taken");
    ok(ev.exit_code == -1 && ev.signal == -1 && ev.time == 0,
       "... each as absent (exit %lld, signal %lld, time %g)",
       (long long)ev.exit_code, (long long)ev.signal, ev.time);
    pl_event_clear(&ev);
    t_body_free(&b);
}

/* ---- encode, then decode: every message comes back as it went ---- */

/* Decode 'w' (built by an encoder) into 'm': the body, or NULL. */
static const msgpack_object *reread(struct pl_wbuf *w, struct pl_msg *m,
                                    int type)
{
    struct pl_error e;

    if (pl_msg_decode(w->sb.data, w->sb.size, m, &e) < 0) {
        diag("envelope refused: %s", e.text);
        return NULL;
    }
    if (m->type != type) {
        diag("type %d, not %d", m->type, type);
        pl_msg_release(m);
        return NULL;
    }
    return m->body;
}

static void test_round_trips(void)
{
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    const msgpack_object *o, *arr;

    /* EVENTS: one full, one bare */
    struct pl_event ev[2], back;
    pl_event_init(&ev[0], 7, 2, 3, PL_ST_FAILED, 1700000000.25);
    ev[0].pid = 4242;
    ev[0].exit_code = 3;
    ev[0].signal = 9;
    ev[0].maxrss_kb = 1234;
    ev[0].error = (char *)"spawn: no such file";
    pl_event_init(&ev[1], 8, 0, 0, PL_ST_RUNNING, 12.5);
    uint64_t evcores[] = { 5, 1 };
    ev[1].cores = evcores; /* a prefetched rank's start */
    ev[1].ncores = 2;
    pl_events_begin(&w, 9, 2);
    pl_event_encode(&w, &ev[0]);
    pl_event_encode(&w, &ev[1]);
    ok((o = reread(&w, &m, PL_MSG_EVENTS)) && m.seq == 9
           && pl_events_decode(o, &arr, &e) == 0 && arr->via.array.size == 2,
       "events: two entries (%s)", e.text);
    if (o && pl_event_decode(&arr->via.array.ptr[0], &back, &e) == 0) {
        ok(back.id == 7 && back.attempt == 2 && back.rank == 3
               && back.state == PL_ST_FAILED && back.time == 1700000000.25
               && back.pid == 4242 && back.exit_code == 3 && back.signal == 9
               && back.maxrss_kb == 1234
               && !strcmp(back.error, "spawn: no such file"),
           "events: the full entry, every field");
        pl_event_clear(&back);
    }
    else
        ok(0, "events: the full entry decodes (%s)", e.text);
    if (o && pl_event_decode(&arr->via.array.ptr[1], &back, &e) == 0) {
        ok(back.id == 8 && back.state == PL_ST_RUNNING && back.pid == -1
               && back.exit_code == -1 && back.signal == -1
               && back.maxrss_kb == -1 && !back.error && back.ncores == 2
               && back.cores[0] == 5 && back.cores[1] == 1,
           "events: the bare entry: absent numbers -1, no error; the "
           "cores of a prefetched rank's start");
        pl_event_clear(&back);
    }
    else
        ok(0, "events: the bare entry decodes (%s)", e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    /* REGISTER with what runs and what ended */
    uint64_t cpu[] = { 4, 5, 6 };
    char *gpus[] = { (char *)"GPU-a", (char *)"GPU-b", NULL };
    uint64_t rcores[] = { 3 };
    struct pl_held run[] = { { .id = 11, .attempt = 1 },
                             { .id = 12, .attempt = 3, .rank = 2,
                               .cores = rcores, .ncores = 1 } };
    struct pl_register reg = { .node = (char *)"n7", .pid = 99, .cpu = cpu,
                               .ncpu = 3, .gpus = gpus, .last_run = 41,
                               .running = run, .nrunning = 2, .ended = ev,
                               .nended = 1 }, r2;
    pl_register_encode(&w, 5, &reg);
    ok((o = reread(&w, &m, PL_MSG_REGISTER)) && m.seq == 5
           && pl_register_decode(o, &r2, &e) == 0,
       "register: decodes (%s)", e.text);
    if (o) {
        ok(!strcmp(r2.node, "n7") && r2.pid == 99 && r2.ncpu == 3
               && r2.cpu[2] == 6 && pl_strv_len(r2.gpus) == 2
               && !strcmp(r2.gpus[1], "GPU-b") && r2.last_run == 41,
           "register: node, pid, cores, gpus, last_run");
        ok(r2.nrunning == 2 && r2.running[1].id == 12
               && r2.running[1].attempt == 3 && r2.running[1].rank == 2
               && r2.running[0].ncores == 0 && r2.running[1].ncores == 1
               && r2.running[1].cores[0] == 3
               && r2.nended == 1 && r2.ended[0].id == 7
               && r2.ended[0].state == PL_ST_FAILED
               && !strcmp(r2.ended[0].error, "spawn: no such file"),
           "register: running and ended");
        pl_register_clear(&r2);
        pl_msg_release(&m);
    }
    pl_wbuf_destroy(&w);

    /* a register whose 'ended' holds a bad event is refused whole */
    struct t_body b;
    t_body_begin(&b, PL_MSG_REGISTER, 3);
    raw_kstr(&b.w.pk, "node", "n1");
    raw_kuintv(&b.w.pk, "cores", cpu, 1);
    raw_key(&b.w.pk, "ended");
    msgpack_pack_array(&b.w.pk, 1);
    msgpack_pack_map(&b.w.pk, 3);
    raw_kuint(&b.w.pk, "id", 1);
    raw_kuint(&b.w.pk, "attempt", 1);
    raw_kstr(&b.w.pk, "state", "exploded");
    errno = 0;
    ok((o = t_body_end(&b)) && pl_register_decode(o, &r2, &e) == -1
           && errno == EPROTO && !r2.node && !r2.ended,
       "register: an ended entry of an unknown state refused (%s)", e.text);
    t_body_free(&b);

    /* WELCOME, and its checks */
    struct pl_welcome wl = { .node = (char *)"n3", .instance = (char *)"p1/42",
                             .heartbeat = 2 }, w2;
    pl_welcome_encode(&w, 17, &wl);
    ok((o = reread(&w, &m, PL_MSG_WELCOME)) && m.seq == 17
           && pl_welcome_decode(o, &w2, &e) == 0 && !strcmp(w2.node, "n3")
           && !strcmp(w2.instance, "p1/42") && w2.heartbeat == 2,
       "welcome: node, instance, heartbeat (%s)", e.text);
    if (o) {
        pl_welcome_clear(&w2);
        pl_msg_release(&m);
    }
    pl_wbuf_destroy(&w);
    double hbs[] = { 0, -1, PL_HEARTBEAT_MAX + 1, NAN };
    for (size_t i = 0; i < 4; i++) {
        wl.heartbeat = hbs[i];
        pl_welcome_encode(&w, 1, &wl);
        errno = 0;
        ok((o = reread(&w, &m, PL_MSG_WELCOME))
               && pl_welcome_decode(o, &w2, &e) == -1 && errno == EPROTO
               && !w2.node,
           "welcome: heartbeat %g refused (%s)", hbs[i], e.text);
        if (o)
            pl_msg_release(&m);
        pl_wbuf_destroy(&w);
    }

    /* PULL, ACK */
    struct pl_pull p = { 3, 1 }, p2;
    uint64_t acked = 0;
    pl_pull_encode(&w, 4, &p);
    ok((o = reread(&w, &m, PL_MSG_PULL)) && pl_pull_decode(o, &p2, &e) == 0
           && p2.free_cores == 3 && p2.free_gpus == 1,
       "pull: free cores and GPUs");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    pl_ack_encode(&w, 123456789);
    ok((o = reread(&w, &m, PL_MSG_ACK)) && pl_ack_decode(o, &acked, &e) == 0
           && acked == 123456789,
       "ack: the seq acknowledged");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    uint64_t got = 0;
    pl_got_encode(&w, 6, 987654321);
    ok((o = reread(&w, &m, PL_MSG_GOT)) && pl_got_decode(o, &got, &e) == 0
           && got == 987654321 && m.seq == 6,
       "got: the last RUN or KILL read");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    /* KILL: of an attempt, of one rank; a grace out of range */
    struct pl_kill k = { .id = 5, .attempt = 2, .grace = 5 }, k2;
    pl_kill_encode(&w, 9, &k);
    ok((o = reread(&w, &m, PL_MSG_KILL)) && pl_kill_decode(o, &k2, &e) == 0
           && k2.id == 5 && k2.attempt == 2 && !k2.one && k2.grace == 5
           && m.seq == 9,
       "kill: every rank of an attempt");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    k.one = true;
    k.rank = 3;
    pl_kill_encode(&w, 9, &k);
    ok((o = reread(&w, &m, PL_MSG_KILL)) && pl_kill_decode(o, &k2, &e) == 0
           && k2.one && k2.rank == 3,
       "kill: one rank");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    ok(!k2.queued_only, "kill: not of held entries only by default");
    k.queued_only = true;
    pl_kill_encode(&w, 9, &k);
    ok((o = reread(&w, &m, PL_MSG_KILL)) && pl_kill_decode(o, &k2, &e) == 0
           && k2.queued_only && k2.one && k2.rank == 3,
       "kill: queued_only (a prefetched entry taken back)");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    k.queued_only = false;
    k.grace = PL_KILL_GRACE_MAX * 2;
    pl_kill_encode(&w, 9, &k);
    errno = 0;
    ok((o = reread(&w, &m, PL_MSG_KILL)) && pl_kill_decode(o, &k2, &e) == -1
           && errno == EPROTO,
       "kill: a grace of %g s refused (%s)", k.grace, e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    /* the bare ones: an empty body of the right type */
    int bare[] = { PL_MSG_EXIT, PL_MSG_REREGISTER, PL_MSG_PING,
                   PL_MSG_HEARTBEAT };
    for (size_t i = 0; i < 4; i++) {
        pl_bare_encode(&w, bare[i], 3);
        ok((o = reread(&w, &m, bare[i])) && o->via.map.size == 0
               && m.seq == 3,
           "%s: an empty body", pl_msg_type_name(bare[i]));
        if (o)
            pl_msg_release(&m);
        pl_wbuf_destroy(&w);
    }
    /* an error text of other bytes than UTF-8 (a path in it): repaired,
     * so that the task's reason is JSON */
    pl_event_init(&ev[1], 8, 0, 0, PL_ST_FAILED, 12.5);
    ev[1].error = (char *)"stdout /d/\xe9t\xe9: No such file";
    pl_events_begin(&w, 10, 1);
    pl_event_encode(&w, &ev[1]);
    memset(&back, 0, sizeof(back));
    bool fixed = (o = reread(&w, &m, PL_MSG_EVENTS))
                 && pl_events_decode(o, &arr, &e) == 0
                 && pl_event_decode(&arr->via.array.ptr[0], &back, &e) == 0
                 && !strcmp(back.error, "stdout /d/?t?: No such file");
    ok(fixed, "events: an error that is not UTF-8 comes with '?' for its "
       "bad bytes (%s)", back.error ? back.error : e.text);
    if (o) {
        pl_event_clear(&back);
        pl_msg_release(&m);
    }
    pl_wbuf_destroy(&w);
    char fix[] = "ok \xc3\xa9 \xff\xfe \xe2\x82 end";
    pl_utf8_repair(fix);
    ok(!strcmp(fix, "ok \xc3\xa9 ?? ?? end"),
       "pl_utf8_repair: valid sequences kept, each bad byte a '?' (%s)", fix);
    ok(pl_node_name_ok("n1") && !pl_node_name_ok("") && !pl_node_name_ok("a,b")
           && pl_gpu_id_ok("GPU-1f2e") && !pl_gpu_id_ok("0;1"),
       "node names and GPU ids: the rules the decoders use");
}

/* A Python call's end: its result inline, or in a file. */
static void test_result(void)
{
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    const msgpack_object *o, *arr;
    struct pl_event ev[2], back;

    pl_event_init(&ev[0], 9, 1, 0, PL_ST_DONE, 12.5);
    ev[0].result_status = PL_PYR_OK;
    ev[0].result = (unsigned char *)"\x80\x05K\x05.";
    ev[0].nresult = 5;
    ev[0].result_size = 5;
    ev[0].result_repr = (char *)"5";
    pl_event_init(&ev[1], 10, 1, 0, PL_ST_FAILED, 12.5);
    ev[1].result_status = PL_PYR_RAISED;
    ev[1].result_file = (char *)"/p/tasks/0/10.result";
    ev[1].result_size = 70000;
    pl_events_begin(&w, 4, 2);
    pl_event_encode(&w, &ev[0]);
    pl_event_encode(&w, &ev[1]);
    ok((o = reread(&w, &m, PL_MSG_EVENTS)) && pl_events_decode(o, &arr, &e)
           == 0 && pl_event_decode(&arr->via.array.ptr[0], &back, &e) == 0
           && back.result_status == PL_PYR_OK && back.nresult == 5
           && !memcmp(back.result, ev[0].result, 5) && back.result_size == 5
           && !back.result_file && !strcmp(back.result_repr, "5"),
       "result: inline, its bytes, size and repr (%s)", e.text);
    pl_event_clear(&back);
    ok(o && pl_event_decode(&arr->via.array.ptr[1], &back, &e) == 0
           && back.result_status == PL_PYR_RAISED && !back.result
           && back.result_size == 70000
           && !strcmp(back.result_file, "/p/tasks/0/10.result"),
       "result: raised, in its file (%s)", e.text);
    pl_event_clear(&back);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    /* inline bytes of another size than said: refused */
    ev[0].result_size = 6;
    pl_events_begin(&w, 5, 1);
    pl_event_encode(&w, &ev[0]);
    ok((o = reread(&w, &m, PL_MSG_EVENTS)) && pl_events_decode(o, &arr, &e)
           == 0 && pl_event_decode(&arr->via.array.ptr[0], &back, &e) < 0,
       "result: bytes and size that disagree refused (%s)", e.text);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
}

/* ---- a rank's CPU and GPU figures (struct pl_usage) ---- */

/* An end event of task 5 with one figure 'key' set to 'v' (a double) or,
 * with 'str', to a string; cpu_sys too when 'key' is cpu_user. */
static int usage_with(const char *key, double v, bool str,
                      struct pl_event *ev, struct pl_error *e)
{
    struct t_body b;
    const msgpack_object *o, *arr;
    bool pair = !strcmp(key, "cpu_user");
    int rc = -2;

    t_body_begin(&b, PL_MSG_EVENTS, 1);
    raw_key(&b.w.pk, "events");
    msgpack_pack_array(&b.w.pk, 1);
    msgpack_pack_map(&b.w.pk, pair ? 5 : 4);
    raw_kuint(&b.w.pk, "id", 5);
    raw_kuint(&b.w.pk, "attempt", 1);
    raw_kstr(&b.w.pk, "state", "done");
    if (str)
        raw_kstr(&b.w.pk, key, "1.5");
    else
        raw_kdouble(&b.w.pk, key, v);
    if (pair)
        raw_kdouble(&b.w.pk, "cpu_sys", 0.25);
    errno = 0;
    if ((o = t_body_end(&b)) && (arr = pl_mp_get(o, "events")))
        rc = pl_event_decode(&arr->via.array.ptr[0], ev, e);
    t_body_free(&b);
    return rc;
}

static void test_usage(void)
{
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    const msgpack_object *o, *arr;
    struct pl_event ev, back;

    /* every figure, encoded then decoded */
    pl_event_init(&ev, 5, 1, 0, PL_ST_DONE, 10.0);
    ev.use = (struct pl_usage){ .has = PL_USE_CPU | PL_USE_GPU_UTIL
                                       | PL_USE_GPU_MEM | PL_USE_GPU_POWER,
                                .cpu_user = 1.25, .cpu_sys = 0.5,
                                .gpu_util = 87.5, .gpu_mem_mb = 40960,
                                .gpu_power_w = 612.25 };
    pl_events_begin(&w, 1, 1);
    pl_event_encode(&w, &ev);
    if ((o = reread(&w, &m, PL_MSG_EVENTS))
        && pl_events_decode(o, &arr, &e) == 0
        && pl_event_decode(&arr->via.array.ptr[0], &back, &e) == 0) {
        ok(back.use.has == ev.use.has && back.use.cpu_user == 1.25
               && back.use.cpu_sys == 0.5 && back.use.gpu_util == 87.5
               && back.use.gpu_mem_mb == 40960
               && back.use.gpu_power_w == 612.25,
           "usage: every figure round-trips");
        pl_event_clear(&back);
    }
    else
        ok(0, "usage: the event decodes (%s)", e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    /* CPU alone: the GPU figures stay absent; none: nothing is sent */
    ev.use = (struct pl_usage){ .has = PL_USE_CPU, .cpu_user = 0,
                                .cpu_sys = 0 };
    pl_events_begin(&w, 2, 1);
    pl_event_encode(&w, &ev);
    if ((o = reread(&w, &m, PL_MSG_EVENTS))
        && pl_events_decode(o, &arr, &e) == 0
        && pl_event_decode(&arr->via.array.ptr[0], &back, &e) == 0) {
        ok(back.use.has == PL_USE_CPU && back.use.cpu_user == 0
               && !pl_mp_get(&arr->via.array.ptr[0], "gpu_util"),
           "usage: CPU figures of 0 s are sent, no GPU figure");
        pl_event_clear(&back);
    }
    else
        ok(0, "usage: the CPU-only event decodes (%s)", e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    ev.use = (struct pl_usage){ 0 };
    pl_events_begin(&w, 3, 1);
    pl_event_encode(&w, &ev);
    if ((o = reread(&w, &m, PL_MSG_EVENTS))
        && pl_events_decode(o, &arr, &e) == 0) {
        const msgpack_object *x = &arr->via.array.ptr[0];
        ok(!pl_mp_get(x, "cpu_user") && !pl_mp_get(x, "cpu_sys")
               && pl_event_decode(x, &back, &e) == 0 && back.use.has == 0,
           "usage: not measured: no field, has 0");
        pl_event_clear(&back);
        pl_msg_release(&m);
    }
    else
        ok(0, "usage: the bare event decodes (%s)", e.text);
    pl_wbuf_destroy(&w);

    /* what a hostile or broken agent may send */
    static const struct {
        const char *key;
        double v;
        bool str;
        const char *what;
    } bad[] = {
        { "cpu_user", -1.0, false, "negative CPU seconds" },
        { "cpu_user", NAN, false, "NaN CPU seconds" },
        { "cpu_user", INFINITY, false, "infinite CPU seconds" },
        { "cpu_user", 1e300, false, "CPU seconds past the bound" },
        { "cpu_user", 0, true, "CPU seconds as a string" },
        { "cpu_sys", 1.0, false, "cpu_sys without cpu_user" },
        { "gpu_util", 100.5, false, "GPU utilisation over 100%" },
        { "gpu_util", -0.5, false, "negative GPU utilisation" },
        { "gpu_mem_mb", NAN, false, "NaN GPU memory" },
        { "gpu_mem_mb", 0, true, "GPU memory as a string" },
        { "gpu_power_w", -3, false, "negative GPU power" },
        { "gpu_power_w", 1e7, false, "GPU power past the bound" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = usage_with(bad[i].key, bad[i].v, bad[i].str, &back, &e);
        ok(rc == -1 && errno == EPROTO && back.use.has == 0,
           "usage: %s refused (%s)", bad[i].what, e.text);
    }
    /* the edges are taken */
    e.text[0] = '\0';
    ok(usage_with("gpu_util", 100, false, &back, &e) == 0
           && back.use.has == PL_USE_GPU_UTIL && back.use.gpu_util == 100,
       "usage: GPU utilisation of 100%% taken (%s)", e.text);
    pl_event_clear(&back);
    ok(usage_with("cpu_user", 0, false, &back, &e) == 0
           && back.use.has == PL_USE_CPU && back.use.cpu_sys == 0.25,
       "usage: CPU of 0 s user, 0.25 s system taken (%s)", e.text);
    pl_event_clear(&back);
}

int main(void)
{
    plan(56 + 17 + 2);
    test_result();
    test_register();
    test_event();
    test_round_trips();
    test_usage();
    return done_testing();
}
